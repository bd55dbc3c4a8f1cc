"""Test helpers for layers, built-in or your own.

``run_layer_tests(layer, spec)`` checks a layer implementation the way every
built-in layer is checked, in float64 under a
:class:`~brainstorm.handlers.debug_handler.DebugHandler`:

1. input deltas match central finite differences of ``sum(w * output)`` for
   random output weights ``w`` (for every output not in
   ``takes_no_output_deltas_from`` and input not in
   ``computes_no_input_deltas_for``);
2. gradients match finite differences likewise (parameters not in
   ``computes_no_gradients_for``);
3. input deltas are added, not overwritten: pre-filled with 1, they end
   exactly 1 higher;
4. the forward pass leaves its inputs and parameters alone (except those in
   ``computes_no_gradients_for``, such as running statistics), and outputs do
   not depend on the previous contents of internals and outputs (context
   slots excepted), nor on the inputs the layer declares them independent
   of (``independent_outputs``);
5. input deltas and gradients do not depend on the previous contents of
   backward internals; a layer with ``can_overwrite_input_deltas``, asked
   to overwrite its input deltas (``overwrite_input_deltas``), gives the
   same input deltas from garbage as check 3's pass added to zeros;
6. the backward pass leaves the inputs, outputs and parameters as the
   forward pass left them (it writes only deltas, gradients and
   internals).

Checks 4 and 6 look at writes as well as values: under the test handler
(:meth:`DebugHandler.read_only
<brainstorm.handlers.debug_writes.ReadOnlyBlocks.read_only>`) an op that
writes into an input or parameter in either pass, or into an output in
the backward pass, fails at once, naming the op, even where it writes
the values already there (an in-place clip inside its bounds).

It also checks that two forward passes from the same buffers and handler
seed agree (:func:`run_repeatable_test`), that a second backward pass after
the same forward pass agrees (:func:`run_backward_repeatable_test`: the
backward pass does not use an output or forward internal it reads as
scratch memory), that a freshly made layer object runs the backward pass
alike (:func:`run_fresh_layer_test`: no state kept on ``self``), that a
backward pass with ``skip_input_deltas`` holding its inputs, as every
training step runs it, gives the same gradients and deltas of the inputs
not skipped (:func:`run_skip_input_deltas_test`), that the inference pass
runs and uses no randomness (:func:`run_inference_test`), and that outputs
with a context slot depend on it (:func:`run_context_test`). These checks,
and checks 4 and 5, run before the finite differences, so that a fault
they name is not reported as wrong deltas. Last, an input in
``computes_no_input_deltas_for`` that the outputs depend on gives a
:class:`LayerTestWarning` (:func:`run_ignored_input_deltas_test`; right for
a mask or targets).

Context slots of recurrent layers are filled with random values, so
gradients are also checked with a non-zero context.

Each configuration names an activation. A layer that takes an
``activation`` argument is built with it, so that every activation is
tested; :func:`run_layer_tests` refuses a configuration whose activation is
not the layer's own. A layer without one ignores it. Example::

    from brainstorm.testing import (get_test_configurations,
                                    instantiate_layer, run_layer_tests)
    for spec in get_test_configurations():
        layer = instantiate_layer(SquareLayerImpl, {'default': (3,)})
        run_layer_tests(layer, spec)
        # a layer with an activation argument gets the configuration's
        layer = instantiate_layer(FullyConnectedLayerImpl, {'default': (3,)},
                                  size=2, activation=spec['activation'])
        run_layer_tests(layer, spec)

An error that the layer's own forward or backward pass raises during the
checks (a ``TypeError`` from NumPy used on a buffer, a ``DebugHandlerError``
from an op given a wrong shape) is raised as a :class:`LayerTestError`
naming the layer, configuration and pass, chained to it.

A spec with an unknown key, an empty or non-int size or another bad value,
or a layer that is not an instance, raises :class:`LayerTestSpecError`
before anything runs, so no check passes without testing anything.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import numbers
import warnings
from collections import OrderedDict
from collections.abc import Mapping
from types import SimpleNamespace

import numpy as np

from brainstorm.errors import ValidationError
from brainstorm.handlers.base_handler import ACTIVATION_ALIASES, ACTIVATIONS
from brainstorm.handlers.debug_array import DebugHandlerWriteError
from brainstorm.handlers.debug_handler import DebugHandler
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.architecture import Connection, get_layer_description
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.buffers import BufferManager
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.layout import create_layout

__all__ = [
    'get_test_configurations',
    'run_layer_tests',
    'check_spec',
    'instantiate_layer',
    'set_up_layer',
    'approx_fprime',
    'get_approx_deltas',
    'get_approx_gradients',
    'run_deltas_test',
    'run_gradients_test',
    'run_deltas_accumulate_test',
    'run_stale_internals_test',
    'run_forward_results_kept_test',
    'run_repeatable_test',
    'run_backward_repeatable_test',
    'run_fresh_layer_test',
    'run_skip_input_deltas_test',
    'run_inference_test',
    'run_context_test',
    'run_ignored_input_deltas_test',
    'get_test_handler',
    'HANDLER',
    'LayerTestError',
    'LayerTestWarning',
    'LayerTestSpecError',
    'SPEC_KEYS',
]

SOURCE_NAME = 'InputSource'


class LayerTestError(AssertionError):
    """A layer failed one of the checks of :func:`run_layer_tests`.

    Also raised for an error the layer's own forward or backward pass
    raised during the checks, naming the layer, configuration and pass;
    that error is its ``__cause__``.
    """

    # True where it reports an error of the layer's own pass (__cause__)
    _from_pass: bool = False


class LayerTestWarning(UserWarning):
    """A layer test found something that is wrong unless it is intended.

    For example, an input in ``computes_no_input_deltas_for`` that the
    outputs depend on: right for a mask or targets, a lost gradient
    otherwise.
    """


class LayerTestSpecError(ValidationError, TypeError):
    """The layer tests were given something they cannot test.

    A spec with an unknown key or a bad value, a configuration whose
    activation is not the layer's, or a layer that is not an instance.
    Both a :class:`~brainstorm.errors.ValidationError` (a ``ValueError``)
    and a ``TypeError``, as a wrong type and a wrong value are both bad
    input here.
    """


def get_test_handler():
    """``DebugHandler(NumpyHandler(np.float64))``, the handler tests use."""
    return DebugHandler(NumpyHandler(np.float64))


#: A handler of the kind the tests use, as Brainstorm 0.5's helpers had it
#: (the checks here make their own, :func:`get_test_handler`).
HANDLER = get_test_handler()


def get_test_configurations():
    """Yield the standard test configurations.

    Each is a dict with ``time_steps``, ``batch_size`` and ``activation``,
    covering sequence lengths 1 and > 1, batch sizes 1 and > 1, and every
    activation function that every layer accepts (all but those of
    :data:`~brainstorm.handlers.base_handler.NEEDS_INPUT`, which only
    ``Elementwise`` takes). Build a layer that takes an activation with
    the configuration's (``activation=spec['activation']``):
    :func:`run_layer_tests` refuses one built with another.
    """
    for time_steps, batch_size, activation in [
        (1, 1, 'tanh'),
        (4, 1, 'sigmoid'),
        (2, 3, 'rel'),
        (1, 3, 'linear'),
        (3, 2, 'el'),
        (2, 2, 'softplus'),
        (3, 1, 'leaky_rel'),
    ]:
        yield {
            'time_steps': time_steps,
            'batch_size': batch_size,
            'activation': activation,
        }


def instantiate_layer(layer_class, in_shapes: dict, name: str | None = None, **kwargs):
    """Create a layer implementation outside a network, for tests.

    Args:
        layer_class: e.g. ``FullyConnectedLayerImpl``.
        in_shapes: input name -> feature shape (tuple or int) for time-sized
            inputs, or a full shape template / BufferStructure.
        name: layer name (default: the type name).
        **kwargs: the layer's arguments. The layer gets them as a network
            gives them, from its architecture: checked by the layer's
            declarations and stored as its constructor function stores them
            (:meth:`ConstructionWrapper.create
            <brainstorm.structure.construction.ConstructionWrapper.create>`),
            then described (tuples become lists, NumPy scalars Python
            numbers; :func:`~brainstorm.describable.get_description`). So a
            layer that passes the checks with ``shape=(2,)`` also works in a
            network, which hands it ``[2]``.

    Raises:
        LayerValidationError: for an argument the layer does not take or
            refuses, as in a network.
        NetworkValidationError: for a bad layer name or type, or an
            argument that cannot be stored in an architecture (no network
            can give it to the layer).
    """
    structures = {}
    for in_name, shape in in_shapes.items():
        if isinstance(shape, BufferStructure):
            structures[in_name] = shape
            continue
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if shape[:1] not in (('T',), ('B',)):
            shape = ('T', 'B') + shape
        structures[in_name] = BufferStructure(*shape)
    name = name or layer_class.__name__[: -len('LayerImpl')]
    kwargs = _network_kwargs(layer_class, name, kwargs)
    incoming = [
        Connection(SOURCE_NAME, in_name, name, in_name) for in_name in structures
    ]
    layer = layer_class(name, structures, incoming, [], **kwargs)
    # the workspaces it gets on the handler the tests run on
    layer.use_workspaces_of(get_test_handler())
    return layer


def _network_kwargs(layer_class, name: str, kwargs: dict) -> dict:
    """``kwargs`` as a network hands them to the layer.

    The constructor function's path (``ConstructionWrapper.create``) and
    the layer's architecture entry, whose arguments
    ``instantiate_layers_from_architecture`` passes on.
    """
    details = ConstructionWrapper.create(layer_class, name=name, **kwargs).layer
    entry = get_layer_description(details)
    return {k: v for k, v in entry.items() if not k.startswith('@')}


def set_up_layer(layer, spec: dict, handler=None):
    """Give ``layer`` its own memory and fill inputs and parameters.

    Returns:
        ``(buffers, manager)``: the layer's BufferView and the BufferManager.
    """
    _check_layer(layer)
    handler = handler or get_test_handler()
    layer.use_workspaces_of(handler)
    source = SimpleNamespace(
        out_shapes=OrderedDict(layer.in_shapes),
        parameter_shapes=OrderedDict(),
        internal_shapes=OrderedDict(),
        in_shapes=OrderedDict(),
        incoming=[],
        grouped_buffers={},
    )
    proxy = SimpleNamespace(
        out_shapes=layer.out_shapes,
        parameter_shapes=layer.parameter_shapes,
        internal_shapes=layer.internal_shapes,
        in_shapes=layer.in_shapes,
        grouped_buffers=layer.grouped_buffers,
        layer_type=layer.layer_type,
        incoming=[Connection(SOURCE_NAME, n, layer.name, n) for n in layer.in_shapes],
    )
    layout = create_layout(OrderedDict([(SOURCE_NAME, source), (layer.name, proxy)]))
    manager = BufferManager(layout, handler)
    manager.resize(spec.get('time_steps', 1), spec.get('batch_size', 1))
    layer.set_handler(handler)
    buffers = manager.views[layer.name]
    rnd = np.random.RandomState(spec.get('seed', 1234))
    for name, array in BufferView.items(buffers.inputs):
        value = spec.get(name)
        if value is None:
            value = rnd.randn(*array.shape)
        _set(handler, array, value, f'input {name!r}')
    inits = spec.get('inits', {})
    for name, array in BufferView.items(buffers.parameters):
        value = inits.get(name)
        if value is None:
            value = rnd.randn(*array.shape)
        _set(handler, array, value, f'parameter {name!r}')
    return buffers, manager


def _set(handler, array, value, what):
    shape = tuple(array.shape)
    value = (
        np.broadcast_to(np.asarray(value, dtype=np.float64), shape)
        if np.ndim(value) == 0
        else np.asarray(value, dtype=np.float64)
    )
    if value.shape != shape:
        raise ValueError(
            f'The test spec gives {what} of shape {value.shape}; '
            f'the layer needs {shape}.'
        )
    handler.set_from_numpy(array, value)


# --------------------------------------------------------- checking specs ---

#: The keys of a spec other than the layer's input names.
SPEC_KEYS = (
    'time_steps',
    'batch_size',
    'activation',
    'inits',
    'eps',
    'output_weights',
    'delta_rtol',
    'delta_atol',
    'gradient_rtol',
    'gradient_atol',
    'seed',
)
_OUTPUT_WEIGHTS = ('random', 'ones')
# the runner seeds RandomStates with seed + 3 at most
_MAX_SEED = 2**32 - 4


def _check_layer(layer):
    if isinstance(layer, Layer):
        return
    if isinstance(layer, type):
        received = f'the class {layer.__name__}'
        example = layer.__name__
    else:
        received = f'layer={layer!r}'
        example = 'MyLayerImpl'
    raise LayerTestSpecError(
        'layer must be a layer instance, made with e.g. '
        f"instantiate_layer({example}, {{'default': (3,)}}). Received: {received}"
    )


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value) -> bool:
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(value)
    )


def _layer_activation(layer):
    """Whether the layer takes an activation, and which it was built with.

    Returns:
        ``(takes_one, name)``, the name canonical (no alias), or None where
        it cannot be told.
    """
    own = getattr(layer, 'activation', None)
    takes_one = isinstance(own, str) or 'activation' in type(layer).expected_kwargs
    if not isinstance(own, str) and takes_one:
        try:
            own = type(layer).check_kwargs(layer.name, layer.kwargs).get('activation')
        except ValidationError:
            own = None
    if not isinstance(own, str):
        return takes_one, None
    return takes_one, ACTIVATION_ALIASES.get(own, own)


_ACTIVATION_NAMES = list(ACTIVATIONS) + list(ACTIVATION_ALIASES)
_TOLERANCE = (
    lambda v: _is_real(v) and v >= 0,
    'a non-negative finite number',
)
#: key -> (test of a valid value, what is expected)
_VALUE_CHECKS = {
    'time_steps': (lambda v: _is_int(v) and v > 0, 'a positive int'),
    'batch_size': (lambda v: _is_int(v) and v > 0, 'a positive int'),
    'activation': (
        lambda v: isinstance(v, str) and v in _ACTIVATION_NAMES,
        f'one of {_ACTIVATION_NAMES}',
    ),
    'inits': (
        lambda v: isinstance(v, Mapping),
        'a dict of parameter names to values',
    ),
    'eps': (lambda v: _is_real(v) and v > 0, 'a positive finite number'),
    'output_weights': (
        lambda v: isinstance(v, str) and v in _OUTPUT_WEIGHTS,
        f'one of {list(_OUTPUT_WEIGHTS)}',
    ),
    'delta_rtol': _TOLERANCE,
    'delta_atol': _TOLERANCE,
    'gradient_rtol': _TOLERANCE,
    'gradient_atol': _TOLERANCE,
    'seed': (
        lambda v: _is_int(v) and 0 <= v <= _MAX_SEED,
        f'an int in [0, {_MAX_SEED}]',
    ),
}


def check_spec(layer, spec) -> None:
    """Check a layer and a spec for :func:`run_layer_tests` before it runs.

    Raises:
        LayerTestSpecError: if ``layer`` is not a layer instance, or the
            spec has a key that is neither in :data:`SPEC_KEYS` nor an
            input of the layer, a size that is not a positive int, an
            ``inits`` entry for a parameter the layer does not have, another
            bad value, or an ``activation`` that is not the layer's own.
    """
    _check_layer(layer)
    where = f"{type(layer).__name__} '{layer.name}'"
    if not isinstance(spec, Mapping):
        raise LayerTestSpecError(
            f'{where}: spec must be a dict such as '
            f"{{'time_steps': 2, 'batch_size': 3}}. Received: spec={spec!r}"
        )
    known = list(SPEC_KEYS) + list(layer.in_shapes)
    for key in spec:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f' (did you mean {close[0]!r}?)' if close else ''
            raise LayerTestSpecError(
                f'{where}: spec has unknown key {key!r}{hint}. Expected only '
                f"{list(SPEC_KEYS)} and the layer's inputs "
                f'{list(layer.in_shapes)}.'
            )
    for key, (valid, expected) in _VALUE_CHECKS.items():
        if key in spec and not valid(spec[key]):
            raise LayerTestSpecError(
                f'{where}: spec[{key!r}] must be {expected}. '
                f'Received: spec[{key!r}]={spec[key]!r}'
            )
    for name in spec.get('inits', {}):
        if name not in layer.parameter_shapes:
            raise LayerTestSpecError(
                f"{where}: spec['inits'] names {name!r}, which is not a "
                'parameter of the layer. Its parameters are: '
                f'{list(layer.parameter_shapes)}'
            )
    if 'activation' in spec:
        _check_activation(layer, spec['activation'], where)


def _check_activation(layer, activation: str, where: str) -> None:
    takes_one, own = _layer_activation(layer)
    if not takes_one:
        return  # a layer without an activation tests the same for every one
    if own is None:
        raise LayerTestSpecError(
            f"{where}: spec['activation']={activation!r}, but which activation "
            'the layer was built with cannot be told (it sets no activation '
            'attribute). Build it with '
            "instantiate_layer(..., activation=spec['activation'])."
        )
    if own != ACTIVATION_ALIASES.get(activation, activation):
        raise LayerTestSpecError(
            f"{where}: spec['activation']={activation!r}, but the layer was "
            f'built with activation={own!r}, so the configuration would not '
            'test its activation. Build it with '
            "instantiate_layer(..., activation=spec['activation'])."
        )


# ------------------------------------------------------ running a layer ---


class _Runner:
    """Runs one layer with fixed randomness and a fixed random context."""

    def __init__(self, layer, spec, handler=None):
        self.layer = layer
        self.spec = spec
        self.buffers, self.manager = set_up_layer(layer, spec, handler)
        self.h = self.manager.handler
        self.seed = spec.get('seed', 1234)
        self.T = spec.get('time_steps', 1)
        rnd = np.random.RandomState(self.seed + 1)
        self.contexts = {}
        for category in ('outputs', 'internals'):
            for name, array in BufferView.items(self.buffers[category]):
                size = self._context_size(category, name)
                if size:
                    self.contexts[category, name] = (
                        rnd.randn(size, *array.shape[1:]) * 0.5
                    )

    def _structure(self, category, name):
        shapes = {
            'outputs': self.layer.out_shapes,
            'internals': self.layer.internal_shapes,
        }[category]
        return shapes[name]

    def _context_size(self, category, name):
        s = self._structure(category, name)
        return 0 if s.is_backward_only else s.context_size

    def get(self, path):
        category, name = path
        return self.h.get_numpy_copy(self.buffers[category][name])

    def real_steps(self, category, name):
        """Copy of a buffer without its context slots."""
        array = self.get((category, name))
        if category in ('outputs', 'internals', 'output_deltas'):
            shapes = (
                self.layer.out_shapes
                if category != 'internals'
                else self.layer.internal_shapes
            )
            if shapes[name].buffer_type == 2 and shapes[name].context_size:
                return array[: self.T]
        return array

    def forward(self, training_pass: bool = True, seed: int | None = None):
        """A forward pass of the layer.

        The handler is seeded with ``seed`` (default: the spec's) and the
        context slots are set to the runner's contexts.
        """
        self.h.rnd.set_seed(self.seed if seed is None else seed)
        for (category, name), ctx in self.contexts.items():
            array = self.buffers[category][name]
            self.h.set_from_numpy(array[self.T :], ctx)
        # statistics a training pass keeps (BatchNorm's running mean) aside
        kept = self.layer.computes_no_gradients_for if training_pass else ()
        try:
            with self._read_only(('inputs', 'parameters'), kept, 'forward_pass'):
                self.layer.forward_pass(self.buffers, training_pass=training_pass)
        except LayerTestError:
            raise
        except Exception as err:
            raise self._pass_error(
                err, 'forward', f'training_pass={training_pass}'
            ) from err

    def _pass_error(self, err: Exception, which: str, how: str) -> LayerTestError:
        """A LayerTestError for an error the layer's own pass raised."""
        error = LayerTestError(
            f'{_describe(self.layer, self.spec)}: the {which} pass '
            f'({type(self.layer).__name__}.{which}_pass with {how}) raised '
            f'{type(err).__name__}, shown above with the line of the layer '
            f'that raised it: {err}'
        )
        error._from_pass = True
        return error

    @contextlib.contextmanager
    def _read_only(self, categories, kept, during: str):
        """A block in which the test handler refuses writes into ``categories``.

        Parameters named in ``kept`` are left writable. A write is reported
        as a LayerTestError naming the buffer, the op and its operand, even
        where it leaves the values as they were (an in-place clip of
        values inside the bounds). Another handler than a DebugHandler
        checks nothing here (the checks of values after the passes remain).
        """
        if not isinstance(self.h, DebugHandler):
            yield
            return
        which = during.split('_')[0]
        buffers = {
            f"the layer's {category[:-1]} '{name}'": (category, name, array)
            for category in categories
            for name, array in BufferView.items(self.buffers[category])
            if not (category == 'parameters' and name in kept)
        }
        arrays = {label: array for label, (_, _, array) in buffers.items()}
        try:
            with self.h.read_only(arrays, f'{type(self.layer).__name__}.{during}'):
                yield
        except DebugHandlerWriteError as err:
            category, name, _ = buffers[err.label]
            may, hint = _MAY_WRITE[which]
            raise LayerTestError(
                f'{_describe(self.layer, self.spec)}: the {which} pass changed '
                f'the {category[:-1]} {name!r}: DebugHandler.{err.op} wrote '
                f'into it through its argument {err.argument!r} (whatever '
                f'the values written). A {which} pass may write only {may}.'
                f'{hint}'
            ) from err

    def backward(
        self,
        output_weights: dict,
        prefill_input_deltas=0.0,
        garbage=None,
        overwrite: frozenset = frozenset(),
        skip: frozenset = frozenset(),
    ):
        """A backward pass with the given output weights as output deltas.

        ``garbage`` (a RandomState) fills the backward internals (and the
        gradients of a layer that ``overwrites_gradients``) with random
        values first, and the deltas of the inputs in ``overwrite``, which
        the layer is then asked to overwrite (``overwrite_input_deltas``).
        The layer's ``skip_input_deltas`` is ``skip`` during the pass, as
        the network sets it in ``backward_pass(input_deltas=False)``.
        """
        self.manager.clear_backward_buffers()
        if garbage is not None:
            _randomize(self, 'internals', True, garbage)
            if self.layer.overwrites_gradients:
                # the network does not zero these gradients
                for name, array in BufferView.items(self.buffers.gradients):
                    if name not in self.layer.computes_no_gradients_for:
                        self.h.set_from_numpy(array, garbage.randn(*array.shape))
        for name, w in output_weights.items():
            array = self.buffers.output_deltas[name]
            if w.shape != tuple(array.shape):
                padded = np.zeros(array.shape)
                padded[: w.shape[0]] = w
                w = padded
            self.h.set_from_numpy(array, w)
        if prefill_input_deltas:
            for array in BufferView.values(self.buffers.input_deltas):
                self.h.fill(array, float(prefill_input_deltas))
        for name in overwrite:
            array = self.buffers.input_deltas[name]
            self.h.set_from_numpy(array, garbage.randn(*array.shape))
        self.layer.overwrite_input_deltas = overwrite
        self.layer.skip_input_deltas = skip
        try:
            with self._read_only(
                ('inputs', 'outputs', 'parameters'), (), 'backward_pass'
            ):
                self.layer.backward_pass(self.buffers)
        except LayerTestError:
            raise
        except Exception as err:
            how = ', '.join(
                f'{attr}={sorted(value)}'
                for attr, value in (
                    ('skip_input_deltas', skip),
                    ('overwrite_input_deltas', overwrite),
                )
            )
            raise self._pass_error(err, 'backward', how) from err
        finally:
            self.layer.skip_input_deltas = frozenset()
            self.layer.overwrite_input_deltas = frozenset()

    def objective(self, output_weights: dict) -> float:
        self.forward()
        return float(
            sum(
                np.sum(self.real_steps('outputs', n) * w)
                for n, w in output_weights.items()
            )
        )

    def random_output_weights(self, output_names):
        rnd = np.random.RandomState(self.seed + 2)
        if self.spec.get('output_weights', 'random') == 'ones':
            return {
                n: np.ones(self.real_steps('outputs', n).shape) for n in output_names
            }
        return {
            n: rnd.randn(*self.real_steps('outputs', n).shape) for n in output_names
        }


#: what each pass may write, and a hint for a pass that writes elsewhere
_MAY_WRITE = {
    'forward': ('outputs and internals', ''),
    'backward': (
        'deltas, gradients and internals',
        ' Compute into an internal declared with is_backward_only=True '
        '(scratch memory of the backward pass) instead.',
    ),
}


def _own_error(err: Exception) -> BaseException:
    """The error the layer's pass raised, if ``err`` reports one."""
    if isinstance(err, LayerTestError) and err._from_pass and err.__cause__:
        return err.__cause__
    return err


def _checked_runner(layer, spec):
    check_spec(layer, spec)
    return _Runner(layer, spec)


def approx_fprime(x0: np.ndarray, f, epsilon: float = 1e-5, *args):
    """Central finite-difference gradient of scalar ``f`` at ``x0``."""
    x0 = np.asarray(x0, dtype=np.float64)
    grad = np.zeros(x0.size)
    x = x0.copy().ravel()
    for i in range(x.size):
        orig = x[i]
        x[i] = orig + epsilon
        f_plus = f(x.reshape(x0.shape), *args)
        x[i] = orig - epsilon
        f_minus = f(x.reshape(x0.shape), *args)
        x[i] = orig
        grad[i] = (f_plus - f_minus) / (2 * epsilon)
    return grad.reshape(x0.shape)


def _approx(runner, category, name, weights, eps):
    array = runner.buffers[category][name]
    x0 = runner.h.get_numpy_copy(array)

    def f(x):
        runner.h.set_from_numpy(array, x)
        return runner.objective(weights)

    grad = approx_fprime(x0, f, eps)
    runner.h.set_from_numpy(array, x0)
    return grad


def get_approx_deltas(runner, in_name, weights, eps=1e-5):
    """Finite-difference deltas of the objective for input ``in_name``."""
    return _approx(runner, 'inputs', in_name, weights, eps)


def get_approx_gradients(runner, param_name, weights, eps=1e-5):
    """Finite-difference gradient of the objective for a parameter."""
    return _approx(runner, 'parameters', param_name, weights, eps)


def _describe(layer, spec):
    conf = {k: v for k, v in spec.items() if k in ('time_steps', 'batch_size')}
    # the activation the layer computes, whatever the spec says
    own = getattr(layer, 'activation', None)
    if isinstance(own, str):
        conf['activation'] = own
    return f"{type(layer).__name__} '{layer.name}' with {conf}"


def _compare(layer, spec, what, analytic, numeric, rtol, atol):
    if analytic.shape != numeric.shape:
        raise LayerTestError(
            f'{_describe(layer, spec)}: {what} has shape '
            f'{analytic.shape}, expected {numeric.shape}'
        )
    if not np.allclose(analytic, numeric, rtol=rtol, atol=atol):
        diff = np.abs(analytic - numeric)
        idx = np.unravel_index(np.argmax(diff), diff.shape)
        raise LayerTestError(
            f'{_describe(layer, spec)}: {what} does not match finite '
            f'differences (rtol={rtol}, atol={atol}, eps={spec.get("eps", 1e-5)}'
            f'): largest |difference| {diff.max():.3g} at index {idx} '
            f'(analytic {analytic[idx]:.6g}, numeric {numeric[idx]:.6g}).'
        )


def _output_names(layer):
    return [n for n in layer.out_shapes if n not in layer.takes_no_output_deltas_from]


def run_deltas_test(layer, spec, runner=None, outputs_name=None):
    """Check 1: input deltas against finite differences.

    Brainstorm 0.5's form, ``run_deltas_test(layer, specs, inputs_name,
    outputs_name)``, checks the deltas of one input for the output
    ``outputs_name`` (its output deltas all 1) and returns True or False,
    printing both deltas if they differ, as 0.5's helpers did.
    """
    if isinstance(runner, str):
        return _run_05_check(layer, spec, 'inputs', runner, outputs_name)
    runner = runner or _checked_runner(layer, spec)
    eps = spec.get('eps', 1e-5)
    weights = runner.random_output_weights(_output_names(layer))
    for in_name in layer.in_shapes:
        if in_name in layer.computes_no_input_deltas_for:
            continue
        runner.forward()
        runner.backward(weights)
        analytic = runner.get(('input_deltas', in_name))
        numeric = get_approx_deltas(runner, in_name, weights, eps)
        _compare(
            layer,
            spec,
            f'input delta {in_name!r} (outputs {list(weights)})',
            analytic,
            numeric,
            spec.get('delta_rtol', 1e-3),
            spec.get('delta_atol', 1e-4),
        )


def run_gradients_test(layer, spec, runner=None, outputs_name=None):
    """Check 2: parameter gradients against finite differences.

    Brainstorm 0.5's form, ``run_gradients_test(layer, specs,
    parameter_name, outputs_name)``, checks one parameter's gradient as
    :func:`run_deltas_test` checks one input, returning True or False.
    """
    if isinstance(runner, str):
        return _run_05_check(layer, spec, 'parameters', runner, outputs_name)
    runner = runner or _checked_runner(layer, spec)
    eps = spec.get('eps', 1e-5)
    weights = runner.random_output_weights(_output_names(layer))
    for param in layer.parameter_shapes:
        if param in layer.computes_no_gradients_for:
            continue
        runner.forward()
        runner.backward(weights)
        analytic = runner.get(('gradients', param))
        numeric = get_approx_gradients(runner, param, weights, eps)
        _compare(
            layer,
            spec,
            f'gradient {param!r}',
            analytic,
            numeric,
            spec.get('gradient_rtol', 1e-4),
            spec.get('gradient_atol', 1e-4),
        )


def _run_05_check(layer, spec, category: str, name, outputs_name) -> bool:
    """Brainstorm 0.5's one-buffer check (see :func:`run_deltas_test`).

    As in 0.5: 3 time steps and a batch of 2 unless the spec says
    otherwise, the spec's ``activation`` ignored, and the tolerances of
    checks 1 and 2.
    """
    spec = {'time_steps': 3, 'batch_size': 2, **spec}
    spec.pop('activation', None)
    runner = _checked_runner(layer, spec)
    shapes = layer.in_shapes if category == 'inputs' else layer.parameter_shapes
    for what, known, value in (
        ('an input' if category == 'inputs' else 'a parameter', shapes, name),
        ('an output', layer.out_shapes, outputs_name),
    ):
        if value not in known:
            raise LayerTestSpecError(
                f"{type(layer).__name__} '{layer.name}': {value!r} is not "
                f'{what} of the layer; it has {list(known)}.'
            )
    weights = {outputs_name: np.ones(runner.real_steps('outputs', outputs_name).shape)}
    runner.forward()
    runner.backward(weights)
    if category == 'inputs':
        analytic = runner.get(('input_deltas', name))
        rtol = 1e-3
    else:
        analytic = runner.get(('gradients', name))
        rtol = 1e-4
    numeric = _approx(runner, category, name, weights, spec.get('eps', 1e-5))
    numeric = numeric.reshape(analytic.shape)
    if np.allclose(numeric, analytic, rtol=rtol, atol=1e-4):
        return True
    print(
        f'{_describe(layer, spec)}: the check of {name!r} for the output '
        f'{outputs_name!r} failed.\nCalculated:\n{analytic}\n'
        f'Approximated:\n{numeric}\nDifference:\n{analytic - numeric}'
    )
    return False


def run_deltas_accumulate_test(layer, spec, runner=None):
    """Check 3: input deltas are added to, not overwritten."""
    runner = runner or _checked_runner(layer, spec)
    weights = runner.random_output_weights(_output_names(layer))
    runner.forward()
    runner.backward(weights)
    before = {n: runner.get(('input_deltas', n)) for n in layer.in_shapes}
    # a forward pass again, so that a backward pass that damages what the
    # forward pass left (run_forward_results_kept_test's business) is not
    # blamed here
    runner.forward()
    runner.backward(weights, prefill_input_deltas=1.0)
    for name in layer.in_shapes:
        if name in layer.computes_no_input_deltas_for:
            continue
        after = runner.get(('input_deltas', name))
        if not np.allclose(after, before[name] + 1.0, rtol=1e-12, atol=1e-12):
            diff = np.abs(after - before[name] - 1.0).max()
            raise LayerTestError(
                f'{_describe(layer, spec)}: input delta {name!r} was '
                'overwritten instead of added to (pre-filled with 1, it should'
                f' end exactly 1 higher; largest |difference| {diff:.3g}).'
            )


def _randomize(runner, category, backward: bool, rnd):
    shapes = {
        'outputs': runner.layer.out_shapes,
        'internals': runner.layer.internal_shapes,
    }[category]
    # deltas of internals the layer passes back are accumulated into, like
    # input deltas: the network zeroes them, so they are never stale
    accumulated = {'d' + x for x in runner.layer.passes_back_internal_deltas}
    for name, structure in shapes.items():
        if structure.is_backward_only != backward or name in accumulated:
            continue
        array = runner.buffers[category][name]
        if structure.buffer_type == 2 and structure.context_size:
            array = array[: runner.T]
        runner.h.set_from_numpy(array, rnd.randn(*array.shape))


def _forward_results(runner, categories=('inputs', 'outputs', 'parameters')) -> dict:
    """Copies of the buffers a layer shares: inputs, outputs, parameters."""
    return {
        (category, name): runner.get((category, name))
        for category in categories
        for name in BufferView.keys(runner.buffers[category])
    }


def _check_kept(
    layer, spec, runner, before: dict, which: str, may: str, hint: str = ''
) -> None:
    """Raise if a buffer of ``before`` differs from its copy there."""
    for (category, name), expected in before.items():
        got = runner.get((category, name))
        if not np.array_equal(got, expected, equal_nan=True):
            what = {'inputs': 'input', 'internals': 'forward internal'}.get(
                category, category[:-1]
            )
            raise LayerTestError(
                f'{_describe(layer, spec)}: the {which} pass changed the '
                f'{what} {name!r} (largest |difference| '
                f'{np.nanmax(np.abs(got - expected)):.3g}); a {which} pass '
                f'may write only {may}.{hint}'
            )


def _forward_internals(layer) -> list:
    """Internals the forward pass writes for the backward pass.

    Those not ``is_backward_only``, less a handler's workspaces (scratch
    memory of both passes).
    """
    own = getattr(layer, '_setup_internals', layer.internal_shapes)
    return [
        name
        for name, structure in layer.internal_shapes.items()
        if name in own and not structure.is_backward_only
    ]


def run_forward_results_kept_test(layer, spec, runner=None):
    """Check 6: the backward pass leaves the buffers it shares alone.

    The inputs (other layers' outputs, which their backward passes and the
    user read), the outputs (the user's results) and the parameters must
    be bit for bit what they were after the forward pass: a layer that
    uses one of them as scratch memory in its backward pass gives other
    layers, and the user, wrong values. (Internals are the layer's own;
    :func:`run_backward_repeatable_test` checks that a backward pass does
    not damage the forward internals it reads.)
    """
    runner = runner or _checked_runner(layer, spec)
    _backward_keeps_shared(layer, spec, runner)


def _backward_keeps_shared(
    layer, spec, runner, categories=('inputs', 'outputs', 'parameters')
) -> None:
    weights = runner.random_output_weights(_output_names(layer))
    runner.forward()
    before = _forward_results(runner, categories)
    runner.backward(weights)
    _check_kept(
        layer,
        spec,
        runner,
        before,
        'backward',
        *_MAY_WRITE['backward'],
    )


def _backward_results(runner) -> dict:
    layer = runner.layer
    return {
        key: runner.get(key)
        for key in [
            ('input_deltas', n)
            for n in layer.in_shapes
            if n not in layer.computes_no_input_deltas_for
        ]
        + [
            ('gradients', n)
            for n in layer.parameter_shapes
            if n not in layer.computes_no_gradients_for
        ]
    }


def run_backward_repeatable_test(layer, spec, runner=None):
    """A second backward pass after the same forward pass agrees.

    A backward pass that uses a forward internal it reads (one not
    ``is_backward_only``) as scratch memory gives a second backward pass
    (and check 3, which runs one) other deltas and gradients; the message
    names the forward internals it changed.
    """
    runner = runner or _checked_runner(layer, spec)
    weights = runner.random_output_weights(_output_names(layer))
    runner.forward()
    kept = {('outputs', n): runner.get(('outputs', n)) for n in layer.out_shapes}
    kept.update(
        {
            ('internals', n): runner.get(('internals', n))
            for n in _forward_internals(layer)
        }
    )
    runner.backward(weights)
    first = _backward_results(runner)
    changed = [
        f'{"output" if c == "outputs" else "forward internal"} {n!r}'
        for (c, n), v in kept.items()
        if not np.array_equal(runner.get((c, n)), v, equal_nan=True)
    ]
    runner.backward(weights)
    for key, expected in first.items():
        got = runner.get(key)
        if np.allclose(got, expected, rtol=1e-10, atol=1e-10):
            continue
        cause = (
            f'The backward pass changed the {", ".join(changed)}, which it '
            'reads: compute into an internal declared with '
            'is_backward_only=True (scratch memory of the backward pass) '
            'instead.'
            if changed
            else f'The layer {_KEEPS_STATE}.'
        )
        raise LayerTestError(
            f'{_describe(layer, spec)}: backward-repeatability check: a second '
            'backward pass after the same forward pass gave different '
            f'{key[0]} {key[1]!r} (largest |difference| '
            f'{np.abs(got - expected).max():.3g}). {cause}'
        )


def _forward_keeps_shared(layer, spec, runner) -> None:
    """A forward pass (run here) writes none of the inputs and parameters.

    Parameters without gradients (``computes_no_gradients_for``) are
    statistics that a training pass may update, and are left out.

    A layer that does would make the next forward pass, and the finite
    differences, differ: this says so rather than blame stale internals.
    """
    shared = _forward_results(runner, ('inputs', 'parameters'))
    for name in layer.computes_no_gradients_for:
        # statistics a training pass keeps (BatchNorm's running mean)
        shared.pop(('parameters', name), None)
    runner.forward()
    _check_kept(layer, spec, runner, shared, 'forward', 'outputs and internals')


def _other_values(original: np.ndarray, leading: int, rnd) -> list:
    """Other values for an input, each made of its own values.

    The values shifted by one element (as before), then values drawn with
    replacement from its values, by whole sample (a time step of a sample
    for a time-sized input) and element by element: unlike a shift, a
    draw changes sums and means too, and values drawn from the input's
    own stay valid values of it (class indices, binary masks, one-hot
    rows).

    Args:
        original: the input's values.
        leading: the axes that count its samples: 2 for a time-sized
            input ``(T, B, ...)``, 1 for a batch-sized one ``(B, ...)``,
            0 for a constant one (its buffer type).
        rnd: the random state to draw with.
    """
    others = [np.roll(original.ravel(), 1).reshape(original.shape)]
    count = int(np.prod(original.shape[:leading], dtype=np.int64))
    if leading and count > 1:
        rows = original.reshape((count,) + original.shape[leading:])
        picked = rnd.randint(0, count, size=count)
        others.append(rows[picked].reshape(original.shape))
    flat = original.ravel()
    others.append(
        flat[rnd.randint(0, flat.size, size=flat.size)].reshape(original.shape)
    )
    return others


def _check_declared_independence(layer, spec, runner) -> None:
    """Outputs in ``independent_outputs`` ignore the inputs named there.

    Each such input gets other values made of its own (so each stays a
    valid value of that input; see :func:`_other_values`); the output must
    keep its values. Values the layer raises an error for are skipped.
    """
    rnd = np.random.RandomState([runner.seed, 4])
    for output, inputs in layer.independent_outputs.items():
        if output not in layer.out_shapes:
            continue
        for name in inputs:
            if name not in layer.in_shapes:
                continue
            original = runner.get(('inputs', name))
            runner.forward()
            expected = runner.real_steps('outputs', output)
            leading = layer.in_shapes[name].buffer_type
            for other in _other_values(original, leading, rnd):
                runner.h.set_from_numpy(runner.buffers.inputs[name], other)
                try:
                    runner.forward()
                except Exception:  # noqa: BLE001 - values it does not take
                    continue
                finally:
                    runner.h.set_from_numpy(runner.buffers.inputs[name], original)
                got = runner.real_steps('outputs', output)
                if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
                    raise LayerTestError(
                        f'{_describe(layer, spec)}: output {output!r} changed '
                        f'with input {name!r} (largest |difference| '
                        f'{np.abs(got - expected).max():.3g}), but the layer '
                        f'declares it independent of {name!r} '
                        '(independent_outputs). Remove the declaration, or '
                        f'make {output!r} not read {name!r}.'
                    )


def run_stale_internals_test(layer, spec, runner=None):
    """Checks 4 and 5: results do not depend on stale buffer contents.

    Check 4 first makes sure that the forward pass writes none of the
    inputs and parameters (a layer scaling its input in place would
    otherwise be reported as depending on stale internals).
    """
    runner = runner or _checked_runner(layer, spec)
    rnd = np.random.RandomState(runner.seed + 3)
    weights = runner.random_output_weights(_output_names(layer))
    _forward_keeps_shared(layer, spec, runner)
    _check_declared_independence(layer, spec, runner)
    runner.forward()
    outputs = {n: runner.real_steps('outputs', n) for n in layer.out_shapes}
    _randomize(runner, 'outputs', False, rnd)
    _randomize(runner, 'internals', False, rnd)
    runner.forward()
    for name, expected in outputs.items():
        got = runner.real_steps('outputs', name)
        if not np.allclose(got, expected, rtol=1e-12, atol=1e-12):
            raise LayerTestError(
                f'{_describe(layer, spec)}: output {name!r} depends on the '
                'previous contents of internals or outputs (largest '
                f'|difference| {np.abs(got - expected).max():.3g}).'
            )
    runner.backward(weights)
    results = {
        ('input_deltas', n): runner.get(('input_deltas', n)) for n in layer.in_shapes
    }
    results.update(
        {('gradients', n): runner.get(('gradients', n)) for n in layer.parameter_shapes}
    )
    runner.forward()
    runner.backward(weights, garbage=rnd)
    for key, expected in results.items():
        if (
            key[1] in layer.computes_no_input_deltas_for
            or key[1] in layer.computes_no_gradients_for
        ):
            continue
        got = runner.get(key)
        if not np.allclose(got, expected, rtol=1e-10, atol=1e-10):
            also = ''
            if key[0] == 'gradients':
                also = (
                    ' or of the gradients (overwrites_gradients is '
                    'declared, so the network does not zero them)'
                )
            if layer.overwrites_backward_internals:
                also += (
                    ' (overwrites_backward_internals is declared, so the '
                    'network does not zero them)'
                )
            raise LayerTestError(
                f'{_describe(layer, spec)}: {key[0]} {key[1]!r} depends on the '
                f'previous contents of backward internals{also} (largest '
                f'|difference| {np.abs(got - expected).max():.3g}).'
            )
    if layer.can_overwrite_input_deltas:
        _check_overwritten_input_deltas(layer, spec, runner, weights, results, rnd)


def _check_overwritten_input_deltas(layer, spec, runner, weights, results, rnd):
    """Asked to overwrite its input deltas, the layer sets every element.

    The deltas are filled with garbage first; they must come out as the
    ``results`` of a pass that added them to zeros.
    """
    names = sorted(
        n for n in layer.in_shapes if n not in layer.computes_no_input_deltas_for
    )
    # all at once, then each alone (the others must still be added to)
    asked = [frozenset(names)] + (
        [frozenset({n}) for n in names] if len(names) > 1 else []
    )
    for overwrite in asked:
        runner.forward()
        # the others hold 1 (check 3's test that they are added to)
        runner.backward(weights, 1.0, garbage=rnd, overwrite=overwrite)
        for name in names:
            got = runner.get(('input_deltas', name))
            expected = results[('input_deltas', name)] + (name not in overwrite)
            if not np.allclose(got, expected, rtol=1e-10, atol=1e-10):
                how = (
                    'depend on their previous contents although the layer '
                    'declares can_overwrite_input_deltas and was asked to '
                    'overwrite them'
                    if name in overwrite
                    else 'were not added to (the layer was asked to overwrite '
                    f'only {sorted(overwrite)})'
                )
                raise LayerTestError(
                    f'{_describe(layer, spec)}: input deltas {name!r} {how} '
                    f'(overwrite_input_deltas; largest |difference| '
                    f'{np.abs(got - expected).max():.3g}).'
                )


def _state(runner, categories=('inputs', 'parameters', 'outputs', 'internals')):
    """Copies of whole buffers (context slots included), to restore."""
    return _forward_results(runner, categories)


def _restore(runner, state: dict) -> None:
    for (category, name), value in state.items():
        runner.h.set_from_numpy(runner.buffers[category][name], value)


def _real_outputs(runner) -> dict:
    return {n: runner.real_steps('outputs', n) for n in runner.layer.out_shapes}


def _first_difference(got: dict, expected: dict, rtol=1e-12, atol=1e-12):
    """``(name, largest |difference|)`` of the first output that differs."""
    for name, value in expected.items():
        if not np.allclose(got[name], value, rtol=rtol, atol=atol, equal_nan=True):
            return name, float(np.nanmax(np.abs(got[name] - value)))
    return None


_KEEPS_STATE = (
    'keeps state between passes on the layer object (self.<attribute> = ... '
    'in forward_pass or backward_pass) instead of in its buffers. Keep what '
    'the backward pass needs in an internal buffer (the internals setup() '
    'returns)'
)


def run_repeatable_test(layer, spec, runner=None):
    """Two forward passes from the same buffers and handler seed agree.

    The inputs, parameters, outputs and internals are restored and the
    handler reseeded before the second pass: outputs that still differ
    come from random numbers drawn outside the handler (``np.random``)
    or state the layer keeps on itself. Run before the finite differences,
    which such a layer fails with a misleading message.
    """
    runner = runner or _checked_runner(layer, spec)
    state = _state(runner)
    runner.forward()
    first = _real_outputs(runner)
    _restore(runner, state)
    runner.forward()
    differs = _first_difference(_real_outputs(runner), first)
    _restore(runner, state)
    if differs:
        raise LayerTestError(
            f'{_describe(layer, spec)}: repeatability check: two forward passes '
            'with the same inputs, parameters, buffer contents and handler seed '
            f'gave different output {differs[0]!r} (largest |difference| '
            f'{differs[1]:.3g}). The layer draws random numbers other than '
            "from its handler (use self.handler.rnd or the handler's "
            'generate_probability_mask, which the network seeds), or '
            f'{_KEEPS_STATE}.'
        )


def _fresh_layer(layer, handler):
    """A new layer object like ``layer``, or None if one cannot be made."""
    try:
        fresh = type(layer)(
            layer.name,
            layer.in_shapes,
            layer.incoming,
            layer.outgoing,
            **layer.kwargs,
        )
        fresh.use_workspaces_of(handler)
    except Exception:  # noqa: BLE001 - nothing to compare with then
        return None
    for attr in ('out_shapes', 'parameter_shapes', 'internal_shapes'):
        if list(getattr(fresh, attr).items()) != list(getattr(layer, attr).items()):
            return None  # the layer was changed after it was made
    fresh.set_handler(handler)
    return fresh


def run_fresh_layer_test(layer, spec, runner=None):
    """The backward pass needs nothing but the buffers.

    A network may run the backward pass long after the forward pass (and
    other layers' passes in between); a layer that keeps values on the
    object between the passes breaks that. The backward pass is run by a
    freshly made layer object (same class, arguments and buffers) after
    the forward pass of ``layer``; it must give the same deltas and
    gradients as ``layer``'s own.
    """
    runner = runner or _checked_runner(layer, spec)
    fresh = _fresh_layer(layer, runner.h)
    if fresh is None:
        return
    weights = runner.random_output_weights(_output_names(layer))
    runner.forward()
    runner.backward(weights)
    expected = _backward_results(runner)
    runner.forward()
    runner.layer = fresh
    try:
        runner.backward(weights)
    except Exception as err:
        cause = _own_error(err)
        raise LayerTestError(
            f'{_describe(layer, spec)}: fresh-object check: the backward pass '
            'of a freshly made layer object (same class, arguments and '
            'buffers, after the forward pass of the tested one) raised '
            f'{type(cause).__name__}: {cause}. The layer {_KEEPS_STATE}.'
        ) from cause
    finally:
        runner.layer = layer
    for key, value in expected.items():
        got = runner.get(key)
        if not np.allclose(got, value, rtol=1e-10, atol=1e-10):
            raise LayerTestError(
                f'{_describe(layer, spec)}: fresh-object check: {key[0]} '
                f'{key[1]!r} of the backward pass differ when a freshly made '
                'layer object (same class, arguments and buffers) runs it '
                'after the forward pass of the tested one (largest '
                f'|difference| {np.abs(got - value).max():.3g}). The layer '
                f'{_KEEPS_STATE}.'
            )


def run_skip_input_deltas_test(layer, spec, runner=None):
    """Skipping input deltas changes no gradient.

    Every training step runs ``backward_pass(input_deltas=False)``: the
    network then sets ``skip_input_deltas`` to the inputs fed only by the
    Input layer, and a layer may skip computing their deltas. The backward
    pass is run with ``skip_input_deltas`` holding all the layer's inputs,
    then (for a layer with several) each alone; every gradient, and the
    deltas of the inputs not skipped, must equal those of a backward pass
    computing every delta. A layer that skips its gradients too (returns
    early) passes every other check and never trains in a network.
    """
    runner = runner or _checked_runner(layer, spec)
    weights = runner.random_output_weights(_output_names(layer))
    runner.forward()
    runner.backward(weights)
    expected = _backward_results(runner)
    names = sorted(layer.in_shapes)
    asked = [frozenset(names)] + (
        [frozenset({n}) for n in names] if len(names) > 1 else []
    )
    for skip in asked:
        runner.forward()
        runner.backward(weights, skip=skip)
        for (category, name), value in expected.items():
            if category == 'input_deltas' and name in skip:
                continue
            got = runner.get((category, name))
            if np.allclose(got, value, rtol=1e-10, atol=1e-10):
                continue
            what = 'gradient' if category == 'gradients' else 'input deltas'
            raise LayerTestError(
                f'{_describe(layer, spec)}: skip_input_deltas check: with '
                f'skip_input_deltas={sorted(skip)} (as the network sets it in '
                'backward_pass(input_deltas=False), which every training '
                f'step runs, for inputs fed only by the Input layer) {what} '
                f'{name!r} differs from that of a backward pass computing '
                f'every delta (largest |difference| '
                f'{np.abs(got - value).max():.3g}). Skip only the products of '
                'the skipped input deltas; the gradients and the deltas of '
                'the other inputs must not change, or the layer does not '
                'train in a network.'
            )


def run_inference_test(layer, spec, runner=None):
    """The inference pass (``training_pass=False``) runs and is repeatable.

    It must leave the inputs and parameters alone, give the same outputs
    for two handler seeds (no dropout or noise at inference) and not
    depend on the previous contents of outputs and internals.
    """
    runner = runner or _checked_runner(layer, spec)
    where = (
        f'{_describe(layer, spec)}: inference check (forward_pass(buffers, '
        'training_pass=False))'
    )
    shared = _forward_results(runner, ('inputs', 'parameters'))
    try:
        runner.forward(training_pass=False)
        first = _real_outputs(runner)
        runner.forward(training_pass=False, seed=runner.seed + 1)
        other_seed = _real_outputs(runner)
        rnd = np.random.RandomState([runner.seed, 5])
        _randomize(runner, 'outputs', False, rnd)
        _randomize(runner, 'internals', False, rnd)
        runner.forward(training_pass=False)
        stale = _real_outputs(runner)
    except Exception as err:
        cause = _own_error(err)
        raise LayerTestError(
            f'{where}: raised {type(cause).__name__}: {cause}. The inference '
            'branch of forward_pass must work too (networks run it to '
            'predict and evaluate).'
        ) from cause
    _check_kept(layer, spec, runner, shared, 'inference', 'outputs and internals')
    differs = _first_difference(other_seed, first)
    if differs:
        raise LayerTestError(
            f'{where}: output {differs[0]!r} differs between two handler seeds '
            f'(largest |difference| {differs[1]:.3g}): the inference pass uses '
            'random numbers. Draw them (dropout masks, noise) only when '
            'training_pass is True.'
        )
    differs = _first_difference(stale, first)
    if differs:
        raise LayerTestError(
            f'{where}: output {differs[0]!r} depends on the previous contents '
            f'of internals or outputs (largest |difference| {differs[1]:.3g}); '
            'write every element of them in the inference branch too.'
        )


def run_context_test(layer, spec, runner=None):
    """Outputs with a context slot depend on the context.

    A recurrent layer's outputs with ``context_size`` carry the previous
    sequence's last steps into the next (``y[t - 1]`` at ``t = 0`` reads
    the context slot). Changing the contexts (those of the outputs and of
    the forward internals, e.g. a cell state or a reversed copy) must
    change the outputs; a layer that ignores them, forward and backward
    alike, passes the finite differences but forgets everything between
    sequences.
    """
    runner = runner or _checked_runner(layer, spec)
    with_context = [n for c, n in runner.contexts if c == 'outputs']
    if not with_context:
        return
    runner.forward()
    expected = _real_outputs(runner)
    contexts = dict(runner.contexts)
    for key, ctx in contexts.items():
        runner.contexts[key] = ctx + 1.0
    try:
        runner.forward()
    finally:
        runner.contexts.update(contexts)
    got = _real_outputs(runner)
    if all(np.array_equal(got[n], v) for n, v in expected.items()):
        name = with_context[0]
        size = layer.out_shapes[name].context_size
        raise LayerTestError(
            f'{_describe(layer, spec)}: context check: output {name!r} has a '
            f'context slot (context_size={size}), but changing the contexts '
            '(the last steps of the previous sequence, after step T - 1 of '
            'the buffers) changes no output: the layer ignores its context. '
            f'Read it at t = 0 (as {name}[t - 1], i.e. {name}[-1]) in the '
            'forward pass and give it a delta in the backward pass, or '
            'declare no context_size.'
        )


#: (layer class, input name) pairs already warned about
_WARNED_NO_DELTAS: set = set()


def run_ignored_input_deltas_test(layer, spec, runner=None):
    """Warn when an input without deltas does change the outputs.

    For each input in ``computes_no_input_deltas_for`` whose values are not
    all whole numbers (class indices and binary masks are skipped) and
    whose name is not ``'mask'`` or ``'targets'`` (they get no deltas by
    intent), the finite-difference deltas are computed; if they are not
    zero, a :class:`LayerTestWarning` says so, once per layer class and
    input: the network loses that input's gradient unless that is
    intended.
    """
    runner = runner or _checked_runner(layer, spec)
    weights = runner.random_output_weights(_output_names(layer))
    atol = spec.get('delta_atol', 1e-4)
    for name in layer.computes_no_input_deltas_for:
        key = (type(layer), name)
        if (
            name not in layer.in_shapes
            or name in ('mask', 'targets')
            or key in _WARNED_NO_DELTAS
        ):
            continue
        values = runner.get(('inputs', name))
        if np.array_equal(values, np.round(values)):
            continue
        try:
            numeric = get_approx_deltas(runner, name, weights, spec.get('eps', 1e-5))
        except Exception:  # noqa: BLE001 - values it does not take
            continue
        if np.abs(numeric).max() > atol:
            _WARNED_NO_DELTAS.add(key)
            warnings.warn(
                f'{_describe(layer, spec)}: input {name!r} is in '
                'computes_no_input_deltas_for, but the outputs depend on it '
                f'(finite-difference delta up to {np.abs(numeric).max():.3g}). '
                'Right for a mask or targets; otherwise compute its delta '
                'and remove it from computes_no_input_deltas_for, or the '
                'layers before it get no gradient.',
                LayerTestWarning,
                stacklevel=3,
            )


def run_layer_tests(layer, spec: dict) -> None:
    """Run all checks on a layer implementation (see the module docstring).

    Args:
        layer: an instantiated layer (see :func:`instantiate_layer`).
        spec: ``time_steps``, ``batch_size`` and optionally: values for
            inputs by name, ``'inits'`` (parameter name -> values), ``'eps'``,
            ``'output_weights'`` (``'random'`` (default) weights the outputs
            in the objective randomly, ``'ones'`` uses 1 as the SPEC does,
            needed by layers such as Loss that ignore their output delta),
            tolerances ``delta_rtol``, ``delta_atol``, ``gradient_rtol``,
            ``gradient_atol``, and ``seed``.

    An ``activation`` (as in :func:`get_test_configurations`) must be the
    one the layer was built with, if it takes one: build it with
    ``instantiate_layer(..., activation=spec['activation'])``. A layer
    without an activation ignores it.

    Raises:
        LayerTestSpecError: before any check, for a layer that is not an
            instance or a bad spec (see :func:`check_spec`).
        LayerTestError: naming the layer, buffer, configuration, tolerance
            and the largest difference; or naming the layer, configuration
            and pass whose error it reports (its ``__cause__``).
    """
    runner = _checked_runner(layer, spec)
    # the checks that name a cause first, so that a layer with such a fault
    # is not reported as a finite-difference mismatch or an overwritten delta
    _forward_keeps_shared(layer, spec, runner)  # check 4's clearest part
    run_repeatable_test(layer, spec, runner)
    # a backward pass that changes inputs or parameters changes every later
    # pass: say so before anything compares two passes
    _backward_keeps_shared(layer, spec, runner, ('inputs', 'parameters'))
    run_backward_repeatable_test(layer, spec, runner)
    run_stale_internals_test(layer, spec, runner)
    run_forward_results_kept_test(layer, spec, runner)  # the outputs too
    run_fresh_layer_test(layer, spec, runner)
    run_skip_input_deltas_test(layer, spec, runner)
    run_inference_test(layer, spec, runner)
    run_context_test(layer, spec, runner)
    run_deltas_test(layer, spec, runner)
    run_gradients_test(layer, spec, runner)
    run_deltas_accumulate_test(layer, spec, runner)
    run_ignored_input_deltas_test(layer, spec, runner)
