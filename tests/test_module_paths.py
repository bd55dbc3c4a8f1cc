"""Names keep their import paths after their modules became packages.

``brainstorm.arguments``, ``brainstorm.data_iterators``, ``brainstorm.tools``
and ``brainstorm.training.steppers`` were single modules; each is now a
package of modules split by concern. ``brainstorm.utils`` was split into
modules by concern (errors, shapes, naming, files) and re-exports them.
Every name that could be imported from the old module still imports from
the same path, and is the very object defined in its new home.
``brainstorm.arguments`` sits below ``brainstorm.describable`` and restores
nested descriptions through the function that ``describable`` registers
with it.
"""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import brainstorm.arguments as arguments
from brainstorm.arguments import checks
from brainstorm.describable import Describable, create_from_description
from brainstorm.utils import DescriptionError

# old path -> {name: the module (new home) that defines it}
MOVED = {
    'brainstorm.arguments': {
        **{
            name: 'brainstorm.arguments.checks'
            for name in [
                'Check',
                'Int',
                'Real',
                'Bool',
                'Str',
                'Choice',
                'Optional',
                'Instance',
                'Callable',
                'Writable',
                'FileName',
                'FloatDtype',
                'SEED',
                'MAX_INT',
            ]
        },
        **{
            name: 'brainstorm.arguments.containers'
            for name in ['ListOf', 'DictOf', 'AnyOf', 'NumericArray']
        },
        **{
            name: 'brainstorm.arguments.declaring'
            for name in [
                'REQUIRED',
                'Arg',
                'check_arguments',
                'check_attributes',
                'check_value',
                'checked_init',
                'declare',
                'declared_arguments',
                'resolve_defaults',
            ]
        },
    },
    'brainstorm.training.steppers': {
        'TrainingStepper': 'brainstorm.training.steppers.base',
        'ForwardStepper': 'brainstorm.training.steppers.sgd',
        'SgdStepper': 'brainstorm.training.steppers.sgd',
        'MomentumStepper': 'brainstorm.training.steppers.sgd',
        'NesterovStepper': 'brainstorm.training.steppers.sgd',
        'RMSPropStepper': 'brainstorm.training.steppers.adaptive',
        'AdamStepper': 'brainstorm.training.steppers.adaptive',
        'AdamWStepper': 'brainstorm.training.steppers.adaptive',
        'MultiStepper': 'brainstorm.training.steppers.multi',
    },
    'brainstorm.data_iterators': {
        'DataIterator': 'brainstorm.data_iterators.base',
        'Undivided': 'brainstorm.data_iterators.sources',
        'Minibatches': 'brainstorm.data_iterators.sources',
        'FromGenerator': 'brainstorm.data_iterators.sources',
        'AddGaussianNoise': 'brainstorm.data_iterators.augmentation',
        'AddSaltNPepper': 'brainstorm.data_iterators.augmentation',
        'Flip': 'brainstorm.data_iterators.augmentation',
        'Pad': 'brainstorm.data_iterators.augmentation',
        'RandomCrop': 'brainstorm.data_iterators.augmentation',
        'OneHot': 'brainstorm.data_iterators.encoding',
        'MultiHot': 'brainstorm.data_iterators.encoding',
        'Shard': 'brainstorm.data_iterators.sharding',
    },
    'brainstorm.tools': {
        'get_in_out_layers': 'brainstorm.tools.building',
        'create_net_from_spec': 'brainstorm.tools.building',
        'evaluate': 'brainstorm.tools.evaluation',
        'extract': 'brainstorm.tools.evaluation',
        'extract_and_save': 'brainstorm.tools.evaluation',
        'BUFFERS_FILE_FORMAT': 'brainstorm.tools.evaluation',
        'get_network_info': 'brainstorm.tools.inspection',
        'print_network_info': 'brainstorm.tools.inspection',
        'draw_network': 'brainstorm.tools.inspection',
        'shuffle_data': 'brainstorm.tools.arrays',
        'split': 'brainstorm.tools.arrays',
        # new in 0.6 (not in the old module), listed so that __all__ stays
        # covered
        'export_onnx': 'brainstorm.tools.onnx_export',
    },
    # the CUDA side became the package brainstorm.handlers.cuda
    'brainstorm.handlers.pycuda_handler': {
        'PyCudaHandler': 'brainstorm.handlers.cuda.handler',
        'INSTALL_HINT': 'brainstorm.handlers.cuda.handler',
        'GPUView': 'brainstorm.handlers.cuda.views',
        'coalesce': 'brainstorm.handlers.cuda.views',
    },
    **{
        f'brainstorm.handlers._{old}': {
            name: new for name in importlib.import_module(new).__all__
        }
        for old, new in [
            ('cublas', 'brainstorm.handlers.cuda.cublas'),
            ('cuda_kernels', 'brainstorm.handlers.cuda.kernels'),
        ]
    },
}

_UTILS_HOMES = {
    'brainstorm.errors': [
        'ValidationError',
        'NetworkValidationError',
        'LayerValidationError',
        'IteratorValidationError',
        'StructureValidationError',
        'TrainingValidationError',
        'UnknownNameError',
        'NonFiniteError',
        'DescriptionError',
        'DatasetValidationError',
        'InitializationError',
        'FileWriteError',
    ],
    'brainstorm.shapes': [
        'product',
        'reshape_view',
        'flatten_time',
        'flatten_time_and_features',
        'flatten_features',
        'flatten_all_but_last',
    ],
    'brainstorm.naming': [
        'NAME_BLACKLIST',
        'PYTHON_IDENTIFIER',
        'LAYER_NAME_RULE',
        'is_valid_layer_name',
        'get_by_path',
        'get_normalized_path',
        'flatten_keys',
    ],
    'brainstorm.files': [
        'as_file_name',
        'write_atomically',
        'open_hdf5',
        'CHECKSUM_ATTRIBUTE',
        'add_checksums',
        'CheckedWriter',
        'write_hdf5',
        'CheckedReader',
        'get_brainstorm_info',
    ],
    'brainstorm.describable': ['get_inheritors'],
    'brainstorm.structure.layout': [
        'flatten',
        'convert_to_nested_indices',
        'sort_by_index_key',
    ],
    'brainstorm.hooks.display': ['progress_bar', 'silence'],
}
MOVED['brainstorm.utils'] = {
    name: home for home, names in _UTILS_HOMES.items() for name in names
}

CASES = [
    (old, name, new) for old, names in MOVED.items() for name, new in names.items()
]


@pytest.mark.parametrize(
    'old, name, new', CASES, ids=[f'{old}.{name}' for old, name, _ in CASES]
)
def test_name_imports_from_its_old_path(old, name, new):
    from_old = getattr(importlib.import_module(old), name)
    assert from_old is getattr(importlib.import_module(new), name)


@pytest.mark.parametrize('old', sorted(MOVED))
def test_star_import_gives_the_same_names(old):
    module = importlib.import_module(old)
    public = set(module.__all__)
    assert public <= set(MOVED[old])
    namespace: dict = {}
    exec(f'from {old} import *', namespace)
    assert public <= set(namespace)


@pytest.mark.parametrize('old', sorted(MOVED))
def test_old_path_imports_first_in_a_fresh_interpreter(old):
    names = ', '.join(sorted(MOVED[old]))
    result = subprocess.run(
        [sys.executable, '-c', f'from {old} import {names}'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_checks_restore_through_the_registered_restorer():
    calls = []

    def fake_restore(described, expected):
        calls.append((described, expected))
        return 'restored'

    original = checks._RESTORER['restore']
    assert original is create_from_description
    arguments.register_restorer(fake_restore)
    try:
        assert arguments.Instance(Describable).restore({'@type': 'X'}) == 'restored'
        assert arguments.Check().restore([1]) == 'restored'
    finally:
        arguments.register_restorer(original)
    assert calls == [({'@type': 'X'}, Describable), ([1], ())]


def test_plain_check_refuses_a_nested_type():
    with pytest.raises(DescriptionError, match='not allowed here'):
        arguments.Check().restore({'@type': 'SgdStepper'})


def test_restoring_without_a_registered_restorer_says_what_to_import():
    original = checks._RESTORER.pop('restore')
    try:
        with pytest.raises(RuntimeError, match='brainstorm.describable'):
            arguments.Check().restore(1)
    finally:
        arguments.register_restorer(original)
