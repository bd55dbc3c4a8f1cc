"""Arguments of the Network's methods that were taken by truthiness or crashed.

* ``forward_pass(training_pass='False')`` ran a training pass (dropout
  on), ``training_pass=np.array([1, 0])`` failed inside a layer with
  NumPy's "truth value is ambiguous"; ``backward_pass(input_deltas='no')``
  and ``provide_external_data(..., all_inputs='no')`` were accepted. They
  are refused now as ``check_finite`` is (NumPy bools are accepted);
* ``get`` and ``get_input`` with a non-str path gave a bare TypeError
  (``can only concatenate str``) or IndexError, and ``get(True)`` read the
  root view's child 1; a ``BufferView`` took ``True`` for index 1;
* ``predict(out_name=<array>)`` failed with "truth value is ambiguous".
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.prediction import UnknownOutputError


@pytest.fixture
def dropout_net():
    inp = bs.layers.Input(out_shapes={'default': ('T', 'B', 4)})
    net = bs.Network.from_layer(inp >> bs.layers.Dropout(0.5, name='D'))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(0.0)
    net.provide_external_data({'default': np.ones((1, 2, 4))})
    return net


@pytest.fixture
def classifier():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    net.provide_external_data(
        {'default': np.ones((1, 2, 3)), 'targets': np.zeros((1, 2, 1))}
    )
    return net


def _assert_names(error, *parts):
    message = str(error.value)
    for part in parts:
        assert part in message, f'{part!r} not in the message {message!r}'


# -------------------------------------------------------- bool flags ---


@pytest.mark.parametrize(
    'value', ['False', 'no', 2, 1.0, np.int64(1), np.array([1, 0]), np.array(True)]
)
def test_forward_pass_refuses_a_training_pass_that_is_no_bool(dropout_net, value):
    with pytest.raises(NetworkValidationError) as error:
        dropout_net.forward_pass(training_pass=value)
    _assert_names(
        error,
        'Network.forward_pass',
        'training_pass must be a bool',
        'Received: training_pass=',
    )


@pytest.mark.parametrize('training_pass', [False, np.False_, None, 0])
def test_forward_pass_takes_bools_and_numpy_bools(dropout_net, training_pass):
    dropout_net.forward_pass(training_pass=training_pass)
    np.testing.assert_array_equal(dropout_net.get('D.outputs.default'), 1.0)


@pytest.mark.parametrize('training_pass', [True, np.True_, 1])
def test_forward_pass_takes_true_values_as_a_training_pass(dropout_net, training_pass):
    # as Brainstorm 0.5, which read the flag by truth, the int 1 is True too;
    # 200 values: some dropped, the rest scaled by 1 / 0.5
    dropout_net.provide_external_data({'default': np.ones((1, 50, 4))})
    dropout_net.forward_pass(training_pass=training_pass)
    outputs = dropout_net.get('D.outputs.default')
    assert set(np.unique(outputs)) <= {0.0, 2.0}, outputs
    assert (outputs == 2.0).any() and (outputs == 0.0).any(), outputs


@pytest.mark.parametrize('value', ['no', 'False', 0, None, np.array([True])])
def test_backward_pass_refuses_input_deltas_that_are_no_bool(classifier, value):
    classifier.forward_pass(training_pass=True)
    with pytest.raises(NetworkValidationError) as error:
        classifier.backward_pass(input_deltas=value)
    _assert_names(
        error,
        'Network.backward_pass',
        'input_deltas must be a bool',
        'Received: input_deltas=',
    )


@pytest.mark.parametrize('input_deltas', [True, False, np.True_, np.False_])
def test_backward_pass_takes_bools_and_numpy_bools(classifier, input_deltas):
    classifier.forward_pass(training_pass=True)
    classifier.backward_pass(input_deltas=input_deltas)
    deltas = classifier.get('Input.output_deltas.default')
    assert bool(np.any(deltas != 0)) == bool(input_deltas), deltas


@pytest.mark.parametrize('value', ['no', 1, None, np.array([1, 0])])
def test_provide_external_data_refuses_all_inputs_that_is_no_bool(classifier, value):
    with pytest.raises(NetworkValidationError) as error:
        classifier.provide_external_data(
            {'default': np.ones((1, 2, 3))}, all_inputs=value
        )
    _assert_names(
        error,
        'Network.provide_external_data',
        'all_inputs must be a bool',
        'Received: all_inputs=',
    )


def test_provide_external_data_takes_a_numpy_false_for_all_inputs(classifier):
    classifier.provide_external_data(
        {'default': np.full((1, 2, 3), 2.0)}, all_inputs=np.False_
    )
    np.testing.assert_array_equal(classifier.get_input('default'), 2.0)
    np.testing.assert_array_equal(classifier.get_input('targets'), 0.0)


# ------------------------------------------------------ buffer paths ---


@pytest.mark.parametrize(
    ('value', 'shown'),
    [(10, '10'), (2**63, str(2**63)), (True, 'True'), (None, 'None'), (b'x', "b'x'")],
)
def test_get_refuses_a_path_that_is_no_str(classifier, value, shown):
    with pytest.raises(NetworkValidationError) as error:
        classifier.get(value)
    assert isinstance(error.value, KeyError)  # get promises one for a bad path
    _assert_names(
        error,
        'Network.get',
        'buffer_path must be a str',
        f'Received: buffer_path={shown}',
    )


@pytest.mark.parametrize(('value', 'shown'), [(5, '5'), (None, 'None')])
def test_get_input_refuses_a_name_that_is_no_str(classifier, value, shown):
    with pytest.raises(KeyError) as error:
        classifier.get_input(value)
    assert isinstance(error.value, NetworkValidationError)
    _assert_names(
        error,
        'Network.get_input',
        'input_name must be a str',
        f'Received: input_name={shown}',
    )


def test_get_and_get_input_still_read_str_paths(classifier):
    assert classifier.get('Input.outputs.default').shape == (1, 2, 3)
    np.testing.assert_array_equal(classifier.get_input(np.str_('default')), 1.0)
    with pytest.raises(KeyError, match='nope'):
        classifier.get('Input.outputs.nope')


def test_a_buffer_view_takes_no_bool_for_an_index():
    first, second = np.zeros(2), np.ones(3)
    view = BufferView(['a', 'b'], [first, second])
    assert view[1] is second and view[np.int64(0)] is first
    with pytest.raises(TypeError) as error:
        view[True]
    _assert_names(error, 'indices must be ints, slices or names', 'Received: True')


# ---------------------------------------------------------- predict ----


@pytest.mark.parametrize(
    ('value', 'shown'),
    [
        (np.array(['a', 'b']), 'array of shape (2,)'),
        (['Output'], "['Output']"),
        (5, '5'),
    ],
)
def test_predict_refuses_an_out_name_that_is_no_str(classifier, value, shown):
    with pytest.raises(UnknownOutputError) as error:
        classifier.predict({'default': np.zeros((1, 2, 3))}, out_name=value)
    assert isinstance(error.value, KeyError)
    _assert_names(
        error,
        'predict',
        'out_name must be None or a str',
        f'Received: out_name={shown}',
    )


def test_predict_still_takes_a_str_or_none_for_out_name(classifier):
    data = {'default': np.zeros((1, 2, 3))}
    by_path = classifier.predict(data, out_name='Output.outputs.predictions')
    classifier.output_name = 'Output.outputs.predictions'
    np.testing.assert_array_equal(classifier.predict(data, out_name=None), by_path)
    assert by_path.shape == (1, 2, 2)
