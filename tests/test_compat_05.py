"""Brainstorm 0.5 code runs unchanged: run_network, module paths,
exception classes, validate_architecture and the training namespace."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Undivided
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    combine_buffer_structures,
)
from brainstorm.training import schedules, steppers
from brainstorm.training.utils import run_network
from tests.training.nets import xor_data, xor_net


def _outputs_for(net, batches):
    outs = []
    for _ in run_network(net, batches):
        net.forward_pass()
        outs.append(np.array(net.get('Output.outputs.predictions')))
    return outs


@pytest.mark.parametrize('kind', ['iterator', 'called', 'list'])
def test_run_network_accepts_iterators_and_iterables(kind):
    """0.5's run_network(net, iterator) looped over any iterable of data
    dicts: a called iterator or a plain list of batches worked, not only
    a DataIterator (ours called it, so those raised TypeError)."""
    net = xor_net()
    data = xor_data()
    expected = _outputs_for(net, Undivided(**data))
    batches = {
        'iterator': Undivided(**data),
        'called': Undivided(**data)(handler=net.handler),
        'list': [data],
    }[kind]
    got = _outputs_for(net, batches)
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], expected[0])


OLD_MODULES = {
    'brainstorm.layers.convolution_layer_2d': 'Convolution2DLayerImpl',
    'brainstorm.layers.batch_normalization_layer': 'BatchNormLayerImpl',
    'brainstorm.layers.pooling_layer_2d': 'Pooling2DLayerImpl',
    'brainstorm.layers.l1_decay': 'L1DecayLayerImpl',
    'brainstorm.layers.l2_decay': 'L2DecayLayerImpl',
}


def test_05_module_paths_import_in_a_fresh_process():
    """0.5 custom-layer files import built-in layers from these module
    paths and subclass them; the paths must import in a fresh interpreter
    and give the very same classes (so the subclass is a real layer)."""
    code = textwrap.dedent("""
        import importlib
        import brainstorm as bs
        import brainstorm.structure.view_references as vr
        assert vr.pattern_matches('Hid*', 'Hid2')
        mods = MODS_PLACEHOLDER
        for path, impl in mods.items():
            m = importlib.import_module(path)
            cls = getattr(m, impl)
            assert issubclass(cls, bs.layers.Layer), path
        from brainstorm.layers.convolution_layer_2d import (
            Convolution2DLayerImpl)
        from brainstorm.layers.convolution_2d_layer import (
            Convolution2DLayerImpl as New)
        assert Convolution2DLayerImpl is New

        class MyConvLayerImpl(Convolution2DLayerImpl):
            pass
        print('ok')
    """).replace('MODS_PLACEHOLDER', repr(OLD_MODULES))
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok'


def test_shape_mismatch_is_caught_by_except_value_error():
    """0.5 raised ValueError for combine_buffer_structures with mismatched
    shapes; `except ValueError` in 0.5 code must still catch ours."""
    a = BufferStructure('T', 'B', 3)
    b = BufferStructure('B', 3)
    with pytest.raises(ValueError):
        combine_buffer_structures([a, b])


def test_mismatched_inputs_are_caught_by_except_value_error():
    """0.5 raised ValueError when connecting layers with incompatible
    shapes (here a 3-d and a 5-d output into one input)."""
    inp = bs.layers.Input(out_shapes={'a': ('T', 'B', 3), 'b': ('T', 'B', 2, 2, 1)})
    fc = bs.layers.FullyConnected(2, name='Out')
    inp - 'a' >> fc
    inp - 'b' >> fc
    with pytest.raises(ValueError, match='Out'):
        bs.Network.from_layer(inp)
    try:
        bs.layers.FullyConnected(-3)
    except ValueError as err:
        assert '-3' in str(err)
    else:
        pytest.fail('a negative size was accepted')


def test_undescribable_value_raises_type_error():
    """0.5's get_description raised TypeError for undescribable values."""
    with pytest.raises(TypeError):
        bs.get_description(object())


def test_validate_architecture_returns_true():
    """0.5's validate_architecture returned True for a valid architecture."""
    from brainstorm.structure.architecture import validate_architecture

    arch = bs.generate_architecture(
        bs.layers.Input(out_shapes={'default': ('T', 'B', 2)})
        >> bs.layers.FullyConnected(2, name='Out')
    )
    assert validate_architecture(arch) is True


def test_every_stepper_and_schedule_is_exported_from_training():
    """Every public stepper and schedule class is in bs.training."""
    for module in (steppers, schedules):
        for name in module.__all__:
            assert getattr(bs.training, name) is getattr(module, name)
            assert name in bs.training.__all__


# Brainstorm 0.5's module namespaces: for every 0.5 module whose path
# brainstorm keeps, every name that module defined or imported at module
# level, read from the IDSIA/brainstorm sources (tag 0.5, commit a68bf03;
# commit b5bcfee, a later merge of the unreleased ``rmsprop`` branch, is the
# same except for ``RMSpropStepper`` and ``AdaDelta``, which no release had).
# Left out everywhere: private names, ``__all__``, ``six`` and its
# ``string_types`` (six is no longer used), ``handlers._cpuop._crop_images``
# (the Cython module is gone) and ``brainstorm.all`` (star imports only).
# Further deliberate gaps are commented at their module.
_LAYER_IMPORTS = (
    'OrderedDict Layer BufferStructure StructureTemplate ConstructionWrapper'
)
NAMESPACES_05 = {
    'brainstorm.initializers': (
        'np Describable Seedable InitializationError Initializer '
        'ArrayInitializer DenseSqrtFanIn DenseSqrtFanInOut EchoState Gaussian '
        'Identity LstmOptInit Orthogonal RandomWalk SparseInputs SparseOutputs '
        'Uniform evaluate_initializer'
    ),
    # hooks: 0.5's ``bk`` and ``warnings`` existed only with bokeh installed
    # (imported inside ``if optional.has_bokeh``).
    'brainstorm.hooks': (
        'math signal sys OrderedDict h5py np Describable optional Network '
        'evaluate get_by_path progress_bar get_brainstorm_info Hook '
        'SaveBestNetwork SaveLogs SaveNetwork MonitorLayerDeltas '
        'MonitorLayerGradients MonitorLayerInOuts MonitorLayerParameters '
        'MonitorLoss MonitorScores EarlyStopper StopAfterEpoch '
        'StopAfterThresholdReached StopOnNan StopOnSigQuit BokehVisualizer '
        'ProgressBar InfoUpdater ModifyStepperAttribute'
    ),
    'brainstorm.data_iterators': (
        'math np Seedable IteratorValidationError DataIterator '
        'AddGaussianNoise AddSaltNPepper Flip OneHot Pad RandomCrop Undivided '
        'Minibatches'
    ),
    'brainstorm.tools': (
        'h5py np layers Network initializers aggregate_losses_and_scores '
        'gather_losses_and_scores run_network get_by_path get_brainstorm_info '
        'draw_network evaluate extract extract_and_save get_in_out_layers '
        'get_network_info print_network_info act_funcs F B D R L C P '
        'create_layer trynumber create_net_from_spec shuffle_data split'
    ),
    'brainstorm.training.steppers': (
        'Describable TrainingStepper ForwardStepper SgdStepper MomentumStepper '
        'NesterovStepper'
    ),
    'brainstorm.training.trainer': (
        'sys traceback OrderedDict Describable aggregate_losses_and_scores '
        'gather_losses_and_scores run_network Trainer'
    ),
    'brainstorm.layers.base_layer': (
        'OrderedDict LayerValidationError get_by_path get_inheritors '
        'get_layer_class_from_typename Layer'
    ),
    'brainstorm.structure.architecture': (
        'OrderedDict namedtuple copy get_layer_class_from_typename '
        'combine_buffer_structures ConstructionWrapper NetworkValidationError '
        'get_normalized_path is_valid_layer_name Connection '
        'get_layer_description generate_architecture parse_connection '
        'collect_all_outgoing_connections collect_all_connections '
        'validate_architecture get_canonical_layer_order get_kwargs '
        'instantiate_layers_from_architecture'
    ),
    'brainstorm.layers.convolution_layer_2d': (
        f'{_LAYER_IMPORTS} Handler flatten_time Convolution2D Convolution2DLayerImpl'
    ),
    'brainstorm.layers.batch_normalization_layer': (
        f'{_LAYER_IMPORTS} flatten_all_but_last BatchNorm BatchNormLayerImpl'
    ),
    'brainstorm.layers.pooling_layer_2d': (
        f'{_LAYER_IMPORTS} flatten_time Pooling2D Pooling2DLayerImpl'
    ),
    'brainstorm.layers.l1_decay': (
        f'{_LAYER_IMPORTS} Handler flatten_time flatten_time_and_features '
        'L1Decay L1DecayLayerImpl'
    ),
    'brainstorm.layers.l2_decay': (
        f'{_LAYER_IMPORTS} Handler flatten_time flatten_time_and_features '
        'L2Decay L2DecayLayerImpl'
    ),
    'brainstorm': (
        'get_description create_from_description global_rnd Network '
        'generate_architecture Trainer initializers data_iterators '
        'value_modifiers tools hooks layers handlers training scorers '
        '__version__'
    ),
    'brainstorm.__about__': ('__version__ __author__ __url__ __license__'),
    'brainstorm.describable': (
        'deepcopy np get_inheritors Describable get_description create_from_description'
    ),
    'brainstorm.handlers': (
        'NumpyHandler DebugHandler has_pycuda pycuda_mock np PyCudaHandler '
        'default_handler'
    ),
    'brainstorm.handlers.base_handler': ('abc Describable Handler'),
    'brainstorm.handlers.debug_handler': (
        'np Handler DebugArray check_for_inf_or_nan DebugHandler '
        'assert_is_shape assert_debug_arrays assert_shapes_equal '
        'assert_is_scalar'
    ),
    # numpy_handler: 0.5's ``import brainstorm`` is left out: no module of
    # the package imports the top part (docs/internals.rst, layering).
    'brainstorm.handlers.numpy_handler': ('np Handler global_rnd NumpyHandler'),
    # pycuda_handler: 0.5 imported pycuda, skcuda (no longer used) and built
    # its kernels (``*_kernel``, ``NUM_CUDA_THREADS``, ``get_blocks``) at
    # import, so those names existed only with PyCUDA installed; the kernels
    # are now built by the handler (``handlers._cuda_kernels``).
    'brainstorm.handlers.pycuda_handler': (
        'np Handler global_rnd flatten_all_but_last PyCudaHandler'
    ),
    'brainstorm.layers': (
        'Layer BatchNorm BinomialCrossEntropy ClockworkLstm Clockwork '
        'Convolution2D DeltasScaling Dropout Elementwise FullyConnected Highway '
        'Input L1Decay L2Decay Loss Lstm Merge Mask NoOp Pooling2D Recurrent '
        'SigmoidCE SoftmaxCE SquaredDifference SquaredError'
    ),
    'brainstorm.layers.binomial_cross_entropy_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features BinomialCrossEntropy '
        'BinomialCrossEntropyLayerImpl'
    ),
    'brainstorm.layers.clockwork_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features Clockwork ClockworkLayerImpl'
    ),
    'brainstorm.layers.clockwork_lstm_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features ClockworkLstm ClockworkLstmLayerImpl'
    ),
    'brainstorm.layers.deltas_scaling_layer': (
        'OrderedDict Layer StructureTemplate ConstructionWrapper '
        'LayerValidationError DeltasScaling DeltasScalingLayerImpl'
    ),
    'brainstorm.layers.dropout_layer': (
        'OrderedDict Layer StructureTemplate ConstructionWrapper Dropout '
        'DropoutLayerImpl'
    ),
    'brainstorm.layers.elementwise_layer': (
        'OrderedDict Layer StructureTemplate ConstructionWrapper Elementwise '
        'ElementwiseLayerImpl'
    ),
    'brainstorm.layers.fully_connected_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features FullyConnected FullyConnectedLayerImpl'
    ),
    'brainstorm.layers.highway_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError Highway HighwayLayerImpl'
    ),
    'brainstorm.layers.input_layer': (
        'OrderedDict Layer BufferStructure ConstructionWrapper '
        'LayerValidationError Input InputLayerImpl'
    ),
    'brainstorm.layers.loss_layer': (f'{_LAYER_IMPORTS} Loss LossLayerImpl'),
    'brainstorm.layers.lstm_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features Lstm LstmLayerImpl'
    ),
    'brainstorm.layers.mask_layer': (
        'OrderedDict Layer StructureTemplate ConstructionWrapper '
        'LayerValidationError product Mask MaskLayerImpl'
    ),
    'brainstorm.layers.merge_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_all_but_last Merge '
        'MergeLayerImpl'
    ),
    'brainstorm.layers.noop_layer': (
        'OrderedDict Layer StructureTemplate ConstructionWrapper NoOp NoOpLayerImpl'
    ),
    'brainstorm.layers.recurrent_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time '
        'flatten_time_and_features Recurrent RecurrentLayerImpl'
    ),
    'brainstorm.layers.sigmoid_ce_layer': (
        f'{_LAYER_IMPORTS} Handler LayerValidationError '
        'flatten_time_and_features flatten_time SigmoidCE SigmoidCELayerImpl'
    ),
    'brainstorm.layers.softmax_ce_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_all_but_last SoftmaxCE '
        'SoftmaxCELayerImpl'
    ),
    'brainstorm.layers.squared_difference_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time_and_features '
        'SquaredDifference SquaredDifferenceLayerImpl'
    ),
    'brainstorm.layers.squared_error_layer': (
        f'{_LAYER_IMPORTS} LayerValidationError flatten_time_and_features '
        'SquaredError SquaredErrorLayerImpl'
    ),
    # optional: the pycuda, skcuda and bokeh modules 0.5 imported here existed
    # only when they were installed (skcuda is no longer used; bokeh is
    # checked below, where it is installed).
    'brainstorm.optional': (
        'sys MissingDependencyMock has_pycuda pycuda_mock has_bokeh bokeh_mock'
    ),
    'brainstorm.randomness': ('np Describable RandomState Seedable global_rnd'),
    'brainstorm.scorers': (
        'OrderedDict np Describable Scorer gather_losses_and_scores '
        'aggregate_losses_and_scores Accuracy Hamming MeanSquaredError'
    ),
    'brainstorm.structure': ('Network generate_architecture'),
    'brainstorm.structure.buffer_structure': (
        'np StructureValidationError ValidationError StructureTemplate '
        'BufferStructure combine_buffer_structures'
    ),
    'brainstorm.structure.buffer_views': ('get_by_path BufferView'),
    # buffers, layout: 0.5's hub-based layout helpers
    # (``create_buffer_views_from_layout``, ``get_total_size_slices_and_shapes``,
    # ``Hub``, ``layout_hubs``, ``group_into_hubs``, ``get_forward_closure``,
    # ``get_order`` and the other ``get_*``/``merge_connections`` helpers)
    # are gone with the hubs (HISTORY.rst, "Memory layout and buffers").
    'brainstorm.structure.buffers': (
        'np default_handler BufferStructure BufferView sort_by_index_key BufferManager'
    ),
    'brainstorm.structure.construction': (
        'NetworkValidationError is_valid_layer_name UniquelyNamed LayerDetails '
        'ConstructionWrapper'
    ),
    'brainstorm.structure.layout': (
        'itertools OrderedDict np BufferStructure NetworkValidationError '
        'get_by_path convert_to_nested_indices flatten get_normalized_path '
        'sort_by_index_key create_layout'
    ),
    # network: ``LossLayerImpl`` is left out (structure never imports layers;
    # docs/internals.rst), and so are the reference helpers below.
    'brainstorm.structure.network': (
        'json OrderedDict h5py np create_from_description get_description '
        'default_handler ArrayInitializer evaluate_initializer Seedable '
        'generate_architecture instantiate_layers_from_architecture BufferView '
        'BufferManager create_layout NetworkValidationError get_brainstorm_info '
        'GradientModifier Network'
    ),
    # view_references: the module was rewritten as the name-pattern matching
    # of ``initialize``, the modifiers and ``MultiStepper`` (HISTORY.rst);
    # 0.5's helpers (``resolve_references``, ``prune_view_references``,
    # ``order_and_copy_modifiers``, ``get_regex_for_reference``, ``Node``,
    # ``empty_dict_from``, ``add_or_update``, ``append_to_all_leaves``,
    # ``apply_references_recursively``, ``evaluate_defaults``,
    # ``get_fallbacks``, ``get_key_to_references_mapping``,
    # ``copy_modifier_for``) are not provided.
    'brainstorm.structure.view_references': (
        're namedtuple deepcopy BufferView NetworkValidationError is_valid_layer_name'
    ),
    'brainstorm.training': (
        'Trainer SgdStepper MomentumStepper NesterovStepper Linear Exponential '
        'MultiStep'
    ),
    'brainstorm.training.schedules': ('np Describable Linear Exponential MultiStep'),
    'brainstorm.training.utils': ('run_network'),
    'brainstorm.utils': (
        'datetime reduce math operator re __version__ product PYTHON_IDENTIFIER '
        'NAME_BLACKLIST is_valid_layer_name ValidationError '
        'NetworkValidationError LayerValidationError IteratorValidationError '
        'StructureValidationError InitializationError get_inheritors flatten '
        'convert_to_nested_indices sort_by_index_key get_by_path '
        'get_normalized_path flatten_time flatten_time_and_features '
        'flatten_features flatten_all_but_last flatten_keys progress_bar '
        'silence get_brainstorm_info'
    ),
    'brainstorm.value_modifiers': (
        'np Describable Seedable ValueModifier GradientModifier ConstrainL2Norm '
        'ClipValues MaskValues FreezeValues L1Decay L2Decay'
    ),
}


@pytest.mark.parametrize('path', sorted(NAMESPACES_05))
def test_every_name_of_a_05_module_imports_from_its_path(path):
    """``from <0.5 path> import <name>`` for every name, in a fresh process
    (e.g. ``from brainstorm.initializers import InitializationError``,
    which Brainstorm 0.5's own tests do)."""
    names = NAMESPACES_05[path].split()
    code = textwrap.dedent(f"""
        import importlib
        module = importlib.import_module({path!r})
        missing = [n for n in {names!r} if not hasattr(module, n)]
        print(' '.join(missing))
        from {path} import {', '.join(names)}
    """)
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, (result.stdout, result.stderr[-2000:])
    assert result.stdout.strip() == ''


def test_05_names_that_moved_are_the_objects_of_their_new_homes():
    from brainstorm import initializers, tools, utils
    from brainstorm.hooks import get_by_path
    from brainstorm.initializers import InitializationError
    from brainstorm.structure import architecture
    from brainstorm.training.trainer import run_network as trainer_run_network

    assert InitializationError is utils.InitializationError
    assert get_by_path is utils.get_by_path
    assert trainer_run_network is run_network
    assert tools.Network is bs.Network
    assert tools.initializers is initializers
    # 0.5's spec helpers build the layers of create_net_from_spec
    assert tools.trynumber('3') == 3 and tools.trynumber('.5') == 0.5
    assert tools.trynumber('p') == 'p'
    assert tools.act_funcs['t'] == 'tanh'
    layer = tools.create_layer('F', ['t', 7])
    assert layer.layer.layer_type == 'FullyConnected'
    assert layer.layer.layer_kwargs == {'size': 7, 'activation': 'tanh'}
    assert tools.D([]).layer.layer_kwargs['drop_prob'] == 0.5
    with pytest.raises(bs.utils.NetworkValidationError):
        tools.F(['x'])
    entry = {
        '@type': 'FullyConnected',
        '@outgoing_connections': {'default': ['Out', 'Out2.extra']},
        'size': [3],
    }
    assert architecture.collect_all_outgoing_connections(entry, 'Hid') == [
        architecture.Connection('Hid', 'default', 'Out', 'default'),
        architecture.Connection('Hid', 'default', 'Out2', 'extra'),
    ]
    kwargs = architecture.get_kwargs(entry)
    assert kwargs == {'size': [3]} and kwargs['size'] is not entry['size']


def test_05_utils_helpers_behave_as_in_05():
    from brainstorm import utils

    assert utils.product((2, 3, 4)) == 24 and utils.product([]) == 1
    assert list(utils.flatten([1, (2, [3, 4]), [], 5])) == [1, 2, 3, 4, 5]
    assert list(utils.convert_to_nested_indices(['a', ('b', ['c']), 'd'])) == [
        0,
        [1, [2]],
        3,
    ]
    start = [5]
    assert list(utils.convert_to_nested_indices(['a', 'b'], start)) == [5, 6]
    assert start == [7]
    items = {'x': {'@index': 2}, 'y': 3, 'z': {'@index': 0}, 'w': {}}.items()
    assert [k for k, _ in sorted(items, key=utils.sort_by_index_key)] == [
        'y',
        'w',
        'z',
        'x',
    ]
    quiet = utils.silence()
    assert [next(quiet) for _ in range(3)] == ['', '', '']
    assert utils.PYTHON_IDENTIFIER.match('_a1') and not utils.PYTHON_IDENTIFIER.match(
        '1a'
    )
    from brainstorm.layers.mask_layer import product

    assert product is utils.product


def test_05_debug_handler_helpers_check_their_arguments():
    from brainstorm.handlers import NumpyHandler
    from brainstorm.handlers import debug_handler as dh

    handler = dh.DebugHandler(NumpyHandler(np.float64))
    a = handler.zeros((2, 3))
    b = handler.zeros((2, 3))
    dh.assert_is_shape((2, 0))
    dh.assert_debug_arrays(a, b)
    dh.assert_shapes_equal(a, b, (2, 3))
    dh.assert_is_scalar(1.5)
    dh.assert_is_scalar(3)
    for bad in ([2, 3], (2, -1), (2.0,), (True,)):
        with pytest.raises(AssertionError, match='shape'):
            dh.assert_is_shape(bad)
    with pytest.raises(dh.DebugHandlerError, match='argument 1 must be a DebugArray'):
        dh.assert_debug_arrays(a, np.zeros((2, 3)))
    with pytest.raises(dh.DebugHandlerError, match=r'argument 2 has shape \(3, 2\)'):
        dh.assert_shapes_equal(a, b, handler.zeros((3, 2)))
    for bad in ('1', True, None, a):
        with pytest.raises(dh.DebugHandlerError, match='scalar'):
            dh.assert_is_scalar(bad)

    @dh.check_for_inf_or_nan
    def op(h, arr, value):
        return 'done'

    assert op(handler, a, 2.0) == 'done'
    assert op.__name__ == 'op'
    nan_array = handler.create_from_numpy(np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="argument '2.'"):
        op(handler, nan_array, 1.0)
    with pytest.raises(ValueError, match="argument '3.'"):
        op(handler, a, float('nan'))
    with pytest.raises(ValueError, match="argument 'value'"):
        op(handler, b, value=float('inf'))


def test_optional_holds_bokeh_exactly_where_it_is_installed():
    """As in 0.5, ``brainstorm.optional.bokeh`` is the module where bokeh is
    installed and absent elsewhere (the GPU machine has no bokeh: the name
    must not be expected there)."""
    import importlib.util

    import brainstorm.optional as optional

    installed = importlib.util.find_spec('bokeh') is not None
    assert optional.has_bokeh is installed
    assert hasattr(optional, 'bokeh') is installed
    assert (optional.bokeh_mock is None) is installed
