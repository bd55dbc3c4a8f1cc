"""Every registered layer through the invariants of brainstorm.testing.

One registry drives all layers: each ``tests/layers/layer_specs_*.py``
module defines ``LAYER_SPECS``, a list of dicts with

* ``id``: test id;
* ``layer_class``, ``in_shapes`` (input name -> feature shape, or a full
  template such as ``('B', 3)``), ``kwargs``;
* ``activation`` (optional, bool): use each configuration's activation;
* ``spec`` (optional): extra entries for ``run_layer_tests``; a callable
  value is called as ``value(time_steps, batch_size, rnd)``;
* ``configurations`` (optional): a list of ``(time_steps, batch_size)`` to
  use instead of the standard configurations.

Every entry runs for every standard configuration (sequence lengths 1 and
> 1, batch sizes 1 and > 1, each activation).
"""

import importlib
import pkgutil

import numpy as np
import pytest

import tests.layers as _pkg
from brainstorm.testing import (
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
)


def _collect():
    entries = []
    for info in sorted(pkgutil.iter_modules(_pkg.__path__), key=lambda i: i.name):
        if info.name.startswith('layer_specs_'):
            module = importlib.import_module(f'tests.layers.{info.name}')
            entries.extend(module.LAYER_SPECS)
    return entries


def _cases():
    cases = []
    for entry in _collect():
        configs = entry.get('configurations')
        if configs is None:
            configs = [
                (c['time_steps'], c['batch_size'], c['activation'])
                for c in get_test_configurations()
            ]
        else:
            configs = [(t, b, None) for t, b in configs]
        for t, b, act in configs:
            if not entry.get('activation'):
                act = None
            case_id = f'{entry["id"]}-T{t}-B{b}' + (f'-{act}' if act else '')
            cases.append(pytest.param(entry, t, b, act, id=case_id))
    return cases


@pytest.mark.parametrize('entry, time_steps, batch_size, activation', _cases())
def test_layer_passes_all_invariants(entry, time_steps, batch_size, activation):
    kwargs = dict(entry.get('kwargs', {}))
    if activation:
        kwargs['activation'] = activation
    layer = instantiate_layer(entry['layer_class'], entry['in_shapes'], **kwargs)
    rnd = np.random.RandomState(7)
    spec = {'time_steps': time_steps, 'batch_size': batch_size}
    if activation:
        spec['activation'] = activation
    for key, value in entry.get('spec', {}).items():
        spec[key] = value(time_steps, batch_size, rnd) if callable(value) else value
    run_layer_tests(layer, spec)


def test_registry_ids_are_unique():
    ids = [entry['id'] for entry in _collect()]
    assert len(ids) == len(set(ids)), sorted(i for i in set(ids) if ids.count(i) > 1)


def test_registry_covers_every_builtin_layer():
    import brainstorm.layers as layers
    from brainstorm.layers.base_layer import Layer

    impls = set()
    for info in pkgutil.iter_modules(layers.__path__):
        if info.name.endswith('_layer') and info.name != 'base_layer':
            module = importlib.import_module(f'brainstorm.layers.{info.name}')
            impls |= {
                v.__name__
                for v in vars(module).values()
                if isinstance(v, type)
                and issubclass(v, Layer)
                and v.__module__ == module.__name__
            }
    registered = {e['layer_class'].__name__ for e in _collect()}
    missing = impls - registered - {'InputLayerImpl'}
    assert impls, 'no layer modules found'
    assert not missing, f'layers without registry entries: {sorted(missing)}'
