"""The rules of ``FiniteCheck`` at their edges (the trainer's check).

One bad element among good ones; +inf, -inf and NaN; ``max_abs`` exactly
at the limit and just beyond it; the order in which layers and buffers are
searched; the message's parts; the handler path for non-NumPy arrays.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.layers import FullyConnected
from brainstorm.training.finite_check import FiniteCheck
from brainstorm.utils import NonFiniteError

TRAINER = SimpleNamespace(current_epoch_nr=7)
BAD = [math.nan, math.inf, -math.inf]


def _net(handler=None):
    inp, out = bs.tools.get_in_out_layers('regression', 3, 2)
    net = bs.Network.from_layer(inp >> FullyConnected(4, name='Hid') >> out)
    if handler is not None:
        net.set_handler(handler)
    net.initialize(0.5)
    return net


def _set(net, layer, kind, name, index, value):
    """Set one value of a buffer through the handler."""
    view = net.buffer[layer][kind][name]
    values = net.handler.get_numpy_copy(view)
    values[index] = value
    net.handler.set_from_numpy(view, values)


def _fed(net):
    x = np.full((1, 2, 3), 0.5)
    net.provide_external_data({'default': x, 'targets': np.zeros((1, 2, 2))})
    net.forward_pass()
    return net


def _numpy_and_debug():
    return [None, DebugHandler(NumpyHandler(np.float32))]


# ------------------------------------------------------------ the loss ---


@pytest.mark.parametrize('loss', BAD)
def test_a_non_finite_loss_stops(loss, monkeypatch):
    net = _fed(_net())
    check = FiniteCheck(net, 1e7)
    check.check_loss(TRAINER, 3)
    assert check.last_finite_update == 3
    first = check.last_finite_loss
    assert math.isfinite(first) and first > 0
    monkeypatch.setattr(net, 'get_loss_values', lambda: {'total_loss': loss})
    with pytest.raises(NonFiniteError) as info:
        check.check_loss(TRAINER, 4)
    message = str(info.value)
    assert f'the training loss is {loss}' in message
    assert 'training stopped at update 4 (epoch 7)' in message
    assert f'last finite training loss {first:.6g} at update 3' in message
    # the failure did not overwrite the last finite loss
    assert (check.last_finite_loss, check.last_finite_update) == (first, 3)


def test_a_finite_loss_passes_and_is_remembered(monkeypatch):
    net = _fed(_net())
    check = FiniteCheck(net, None)
    for update, loss in enumerate([1e30, -2.5, 0.0], start=1):
        monkeypatch.setattr(net, 'get_loss_values', lambda v=loss: {'total_loss': v})
        check.check_loss(TRAINER, update)
        assert (check.last_finite_loss, check.last_finite_update) == (loss, update)


def test_the_first_loss_already_bad_says_so(monkeypatch):
    net = _fed(_net())
    check = FiniteCheck(net, 1e7)
    monkeypatch.setattr(net, 'get_loss_values', lambda: {'total_loss': math.nan})
    with pytest.raises(NonFiniteError, match='no finite training loss before it'):
        check.check_loss(TRAINER, 1)


def test_a_nan_loss_is_located_in_the_outputs_first():
    """The forward pass shows where it began: outputs before parameters."""
    net = _net()
    x = np.full((1, 2, 3), 0.5)
    targets = np.zeros((1, 2, 2))
    targets[0, 1, 0] = math.nan
    net.provide_external_data({'default': x, 'targets': targets}, check_finite=False)
    with np.errstate(all='ignore'):
        net.forward_pass()
    _set(net, 'Hid', 'parameters', 'W', (0, 0), math.inf)  # also broken
    check = FiniteCheck(net, 1e7)
    with pytest.raises(NonFiniteError) as info:
        check.check_loss(TRAINER, 1)
    message = str(info.value)
    assert 'the training loss is nan' in message
    assert "first problem in layer 'Input', buffer 'outputs.targets'" in message
    assert '(1 NaN and 0 infinite of 4 values)' in message


# ------------------------------------------------------ the parameters ---


@pytest.mark.parametrize('value', BAD)
def test_one_bad_parameter_among_good_ones_stops(value):
    net = _net()
    check = FiniteCheck(net, 1e7)
    check.check_parameters(TRAINER, 2)  # all good
    _set(net, 'Output_projection', 'parameters', 'bias', (1,), value)
    with pytest.raises(NonFiniteError) as info:
        check.check_parameters(TRAINER, 2)
    message = str(info.value)
    assert 'a parameter is not finite or too large' in message
    nan, inf = (1, 0) if math.isnan(value) else (0, 1)
    assert (
        f"first problem in layer 'Output_projection', buffer "
        f"'parameters.bias' ({nan} NaN and {inf} infinite of 2 values)"
    ) in message


@pytest.mark.parametrize('value', BAD)
def test_a_bad_parameter_stops_without_a_limit(value):
    """max_abs None: the limit of the fast test is inf, and an inf square
    norm must still fail it (it passed, before: ``inf <= inf``)."""
    net = _net()
    _set(net, 'Hid', 'parameters', 'W', (2, 1), value)
    with pytest.raises(NonFiniteError, match="layer 'Hid', buffer 'parameters.W'"):
        FiniteCheck(net, None).check_parameters(TRAINER, 1)


@pytest.mark.parametrize('handler', _numpy_and_debug())
def test_max_abs_is_included_and_just_beyond_it_stops(handler):
    limit = 8.0  # exactly representable in float32
    net = _net(handler)
    _set(net, 'Hid', 'parameters', 'bias', (3,), -limit)
    check = FiniteCheck(net, limit)
    check.check_parameters(TRAINER, 1)  # at the limit: fine
    # -9 as a float32 too: NumPy 1.x steps from -8 in float64, a step that
    # rounds back to -8 in float32
    beyond = np.nextafter(np.float32(-limit), np.float32(-9))
    _set(net, 'Hid', 'parameters', 'bias', (3,), beyond)
    with pytest.raises(NonFiniteError) as info:
        check.check_parameters(TRAINER, 1)
    message = str(info.value)
    assert (
        "layer 'Hid', buffer 'parameters.bias' (values up to 8 in magnitude" in message
    )
    assert 'beyond max_abs_parameter=8: training diverged' in message


@pytest.mark.parametrize('handler', _numpy_and_debug())
def test_a_large_norm_of_moderate_values_is_no_error(handler):
    # every value is 0.9 <= max_abs 1, but the norm of all is far above 1
    net = _net(handler)
    net.initialize(0.9)
    check = FiniteCheck(net, 1.0)
    assert check._square_norm() > 1.0
    check.check_parameters(TRAINER, 1)


@pytest.mark.parametrize('handler', _numpy_and_debug())
def test_the_square_norm_is_the_sum_of_squares(handler):
    net = _net(handler)
    params = net.handler.get_numpy_copy(net.buffer.parameters).astype(np.float64)
    check = FiniteCheck(net, 1e7)
    assert check._square_norm() == pytest.approx(float(params @ params), rel=1e-6)
    assert check.limit == 1e14
    assert FiniteCheck(net, None).limit == math.inf


def test_huge_finite_parameters_pass_without_a_limit():
    net = _net()
    net.initialize(1e30)
    FiniteCheck(net, None).check_parameters(TRAINER, 1)
    with pytest.raises(NonFiniteError, match='beyond max_abs_parameter=1e\\+07'):
        FiniteCheck(net, 1e7).check_parameters(TRAINER, 1)


def test_the_first_layer_in_canonical_order_is_named():
    net = _net()
    _set(net, 'Output_projection', 'parameters', 'W', (0, 0), math.nan)
    _set(net, 'Hid', 'parameters', 'W', (1, 1), math.inf)
    with pytest.raises(NonFiniteError, match="first problem in layer 'Hid', buffer"):
        FiniteCheck(net, 1e7).check_parameters(TRAINER, 1)


def test_parameters_are_searched_before_outputs():
    net = _fed(_net())
    _set(net, 'Hid', 'outputs', 'default', (0, 0, 0), math.nan)
    _set(net, 'Output_projection', 'parameters', 'bias', (0,), math.inf)
    with pytest.raises(NonFiniteError) as info:
        FiniteCheck(net, 1e7).check_parameters(TRAINER, 1)
    assert "layer 'Output_projection', buffer 'parameters.bias'" in str(info.value)


def test_a_network_without_parameters_passes():
    inp = bs.layers.Input(out_shapes={'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> bs.layers.NoOp(name='S'))
    check = FiniteCheck(net, 1.0)
    assert check._square_norm() == 0.0
    check.check_parameters(TRAINER, 1)


def test_a_broken_parameter_found_by_norm_but_not_located_is_no_error(monkeypatch):
    """Only a located problem raises: the fast test is only a filter."""
    net = _net()
    net.initialize(0.9)
    check = FiniteCheck(net, 1.0)
    monkeypatch.setattr(check, '_square_norm', lambda: math.inf)
    check.check_parameters(TRAINER, 1)
    monkeypatch.setattr(
        check, '_locate', lambda loss_first=False: ('L', 'parameters.W', 'x')
    )
    with pytest.raises(
        NonFiniteError, match="layer 'L', buffer 'parameters.W' \\(x\\)"
    ):
        check.check_parameters(TRAINER, 1)


def test_outputs_beyond_max_abs_are_no_problem():
    """max_abs limits parameters only, not outputs or internals."""
    net = _fed(_net())
    _set(net, 'Hid', 'outputs', 'default', (0, 0, 0), 1e6)
    check = FiniteCheck(net, 1.0)
    assert check._locate() is None
    assert check._locate(loss_first=True) is None


def test_the_message_when_nothing_is_located(monkeypatch):
    net = _fed(_net())
    check = FiniteCheck(net, 1e7)
    monkeypatch.setattr(net, 'get_loss_values', lambda: {'total_loss': math.inf})
    with pytest.raises(NonFiniteError) as info:
        check.check_loss(TRAINER, 5)
    message = str(info.value)
    assert 'no layer buffer holds a non-finite value' in message
    assert 'Trainer(check_finite=False) turns this check off' in message


# ----------------------------------------------------- in the trainer ---


class _Batches(bs.data_iterators.DataIterator):
    """A user's iterator that does not check its data."""

    def __init__(self, x, y):
        super().__init__({'default': x.shape, 'targets': y.shape}, 1)
        self.x, self.y = x, y

    def __call__(self, handler=None):
        yield {'default': self.x, 'targets': self.y}


def test_the_trainer_checks_each_batch_unless_check_finite_is_off():
    x = np.full((1, 2, 3), 0.5)
    x[0, 1, 2] = math.inf
    y = np.zeros((1, 2, 2))
    trainer = bs.Trainer(bs.training.SgdStepper(0.0), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(
        bs.utils.NetworkValidationError,
        match=r"Input 'default': the data holds an infinite value at index \(0, 1, 2\)",
    ):
        trainer.train(_net(), _Batches(x, y))
    trainer = bs.Trainer(bs.training.SgdStepper(0.0), verbose=False, check_finite=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with np.errstate(all='ignore'):
        trainer.train(_net(), _Batches(x, y))
    assert trainer.current_update_nr == 1


# -------------------------------------------------------- what it costs ---


def test_numpy_parameters_take_the_numpy_fast_path(monkeypatch):
    """With a NumpyHandler the square norm is one np.dot of the flat
    parameters: no handler op and no copy."""
    net = _net()
    check = FiniteCheck(net, 1e7)
    assert check._numpy
    for op in ('dot_mm', 'get_numpy_copy'):
        monkeypatch.setattr(
            net.handler, op, lambda *a, **k: pytest.fail('handler op called')
        )
    params = net.buffer.parameters
    assert check._square_norm() == pytest.approx(float(np.dot(params, params)))
    check.check_parameters(TRAINER, 1)


def test_other_handlers_take_the_handler_path():
    net = _net(DebugHandler(NumpyHandler(np.float32)))
    assert not FiniteCheck(net, 1e7)._numpy


def test_at_exactly_the_limit_the_layers_are_not_searched(monkeypatch):
    """Square norm == max_abs ** 2: nothing can be wrong (every value is at
    most the norm), so the slow search does not run."""
    net = _net()
    net.initialize(0.0)
    _set(net, 'Hid', 'parameters', 'W', (0, 0), 8.0)
    check = FiniteCheck(net, 8.0)
    assert check._square_norm() == check.limit == 64.0
    monkeypatch.setattr(
        check, '_locate', lambda loss_first=False: pytest.fail('layers searched')
    )
    check.check_parameters(TRAINER, 1)


def test_the_check_makes_its_views_once_per_memory():
    """Nothing is allocated per update: the views of the parameters (and
    the scratch of a handler whose arrays are no NumPy arrays) are made
    again only when the network's memory moves."""
    import numpy as np

    import brainstorm as bs
    from brainstorm.handlers import DebugHandler
    from brainstorm.training.finite_check import FiniteCheck
    from tests.training.nets import CountingHandler

    counting = CountingHandler(np.float64)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    net.set_handler(DebugHandler(counting))
    net.initialize(0.1)
    check = FiniteCheck(net, max_abs=1e3)
    norm = check._square_norm()
    counting.allocations = 0
    for _ in range(3):
        assert check._square_norm() == norm
    assert counting.allocations == 0
    for batch_size in (2, 5):  # new (larger) batch memory: the same parameters
        net.provide_external_data(
            {
                'default': np.ones((1, batch_size, 4)),
                'targets': np.zeros((1, batch_size, 1)),
            }
        )
        counting.allocations = 0
        assert check._square_norm() == norm
        assert counting.allocations == 0
    net.set_handler(DebugHandler(CountingHandler(np.float64)))
    net.initialize(0.2)  # in the new memory only
    assert check._square_norm() == pytest.approx(4 * norm)
