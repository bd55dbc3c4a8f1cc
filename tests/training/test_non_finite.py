"""Non-finite values stop training loudly: the trainer raises NonFiniteError
naming the update, the layer and buffer and the last finite loss, before
any hook sees the broken network."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.hooks import Hook, StopAfterEpoch, StopOnNan
from brainstorm.layers import BatchNorm, FullyConnected
from brainstorm.training import steppers
from brainstorm.utils import (
    IteratorValidationError,
    NetworkValidationError,
    NonFiniteError,
    TrainingValidationError,
    ValidationError,
)


class FiniteWitness(Hook):
    """Fails the test if a hook is ever called with a broken network."""

    def __init__(self, timescale):
        super().__init__(f'witness_{timescale}', timescale, 1)
        self.calls = 0

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        params = net.get('parameters')
        assert np.isfinite(params).all() and np.abs(params).max() <= 1e7
        self.calls += 1


def data(kind, scale=1.0, n=64):
    rnd = np.random.RandomState(0)
    x = (rnd.randn(1, n, 10) * scale).astype(np.float32)
    if kind == 'classification':
        y = rnd.randint(0, 3, (1, n, 1))
    elif kind == 'multi-label':
        y = rnd.randint(0, 2, (1, n, 3)).astype(np.float32)
    else:
        y = rnd.randn(1, n, 3).astype(np.float32)
    return {'default': x, 'targets': y}


def probe(
    stepper,
    kind='classification',
    scale=1.0,
    batchnorm=False,
    witness=True,
    **trainer_kwargs,
):
    """Train a small net on the default handler for up to 50 epochs."""
    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers(kind, 10, 3)
    hidden = inp >> FullyConnected(20, name='Hid')
    if batchnorm:
        hidden = hidden >> BatchNorm(name='BN')
    net = bs.Network.from_layer(hidden >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(stepper, verbose=False, **trainer_kwargs)
    witnesses = [FiniteWitness('update'), FiniteWitness('epoch')] if witness else []
    for hook in witnesses:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(50))
    trainer.train(net, Minibatches(16, **data(kind, scale)))
    return trainer, net, witnesses


PROBES = {
    'sgd_lr_1e3': dict(stepper=lambda: steppers.SgdStepper(1e3)),
    'momentum_lr_1e6': dict(
        stepper=lambda: steppers.MomentumStepper(1e6, momentum=0.9)
    ),
    'inputs_x1e6': dict(stepper=lambda: steppers.SgdStepper(0.1), scale=1e6),
    'sigmoid_ce_lr_1e8': dict(
        stepper=lambda: steppers.SgdStepper(1e8), kind='multi-label'
    ),
    'batchnorm_lr_1e8': dict(stepper=lambda: steppers.SgdStepper(1e8), batchnorm=True),
    'regression_lr_1e3': dict(
        stepper=lambda: steppers.SgdStepper(1e3), kind='regression'
    ),
    'adam_lr_1e6': dict(stepper=lambda: steppers.AdamStepper(1e6)),
    'rmsprop_lr_1e6': dict(stepper=lambda: steppers.RMSPropStepper(1e6)),
}


@pytest.mark.parametrize('name', sorted(PROBES))
def test_probe_raises_naming_update_and_layer(name):
    kwargs = dict(PROBES[name])
    stepper = kwargs.pop('stepper')()
    with np.errstate(all='ignore'), pytest.raises(NonFiniteError) as info:
        probe(stepper, **kwargs)
    err = info.value
    assert isinstance(err, FloatingPointError)
    assert isinstance(err, ValidationError)
    message = str(err)
    assert 'training stopped at update ' in message
    assert "in layer '" in message and "buffer '" in message
    assert 'last finite training loss' in message
    assert 'check_finite=False' in message


def test_hooks_never_see_the_broken_network():
    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers('classification', 10, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(20, name='Hid') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(steppers.SgdStepper(1e3), verbose=False)
    witness = FiniteWitness('update')
    trainer.add_hook(witness)
    trainer.add_hook(StopAfterEpoch(50))
    with np.errstate(all='ignore'), pytest.raises(NonFiniteError) as info:
        trainer.train(net, Minibatches(16, **data('classification')))
    update = int(str(info.value).split('update ')[1].split()[0])
    # the witness ran at updates 0 .. update-1, never at the failing one
    assert witness.calls == update == trainer.current_update_nr
    assert (
        not np.isfinite(net.get('parameters')).all()
        or np.abs(net.get('parameters')).max() > 1e7
    )


def test_nan_data_is_refused_at_its_batch():
    """A NaN target of a regression, in an iterator that skipped its check.

    The trainer checks each batch as it is given to the network (see
    ``Network.provide_external_data``), before the NaN reaches the loss;
    the NaN loss itself is located by ``FiniteCheck`` (see
    tests/training/test_finite_check.py).
    """
    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers('regression', 10, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(5, name='Hid') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(steppers.SgdStepper(0.0), verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    d = data('regression')
    d['targets'][0, 40, 1] = np.nan
    with pytest.raises(NetworkValidationError) as info:
        trainer.train(net, Minibatches(16, shuffle=False, check_finite=False, **d))
    # sample 40 is sample 8 of the third batch
    assert "Input 'targets': the data holds NaN at index (0, 8, 1)" in str(info.value)
    assert trainer.current_update_nr == 2


def test_check_can_be_turned_off():
    with np.errstate(all='ignore'):
        trainer, net, _ = probe(
            steppers.SgdStepper(1e3), witness=False, check_finite=False
        )
    assert trainer.current_epoch_nr == 50
    assert not np.isfinite(net.get('parameters')).all()
    with np.errstate(all='ignore'):
        trainer, net, _ = probe(
            steppers.AdamStepper(1e6), witness=False, max_abs_parameter=None
        )
    assert trainer.current_epoch_nr == 50
    assert np.abs(net.get('parameters')).max() > 1e7


@pytest.mark.parametrize(
    'kwargs',
    [
        {'check_finite': 1},
        {'max_abs_parameter': 0},
        {'max_abs_parameter': 'big'},
        {'max_abs_parameter': True},
    ],
)
def test_bad_check_arguments(kwargs):
    name = next(iter(kwargs))
    with pytest.raises(TrainingValidationError, match=name):
        bs.Trainer(steppers.SgdStepper(0.1), **kwargs)


def test_stop_on_nan_is_not_quiet(capsys):
    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers('classification', 10, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(20, name='Hid') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(steppers.SgdStepper(1e3), verbose=False, check_finite=False)
    trainer.add_hook(StopOnNan(timescale='update', verbose=False))
    trainer.add_hook(StopAfterEpoch(50))
    with np.errstate(all='ignore'):
        trainer.train(net, Minibatches(16, **data('classification')))
    assert trainer.current_epoch_nr < 50
    assert 'StopOnNan >> Stopping because' in capsys.readouterr().err
    assert 'not finite' in trainer.logs['StopOnNan'][0]


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize('iterator', ['Undivided', 'Minibatches'])
def test_iterators_check_data_once(bad, iterator):
    d = data('regression')
    d['default'] = d['default'].copy()
    d['default'][0, 7, 2] = bad
    make = (
        (lambda **kw: Undivided(**kw))
        if iterator == 'Undivided'
        else (lambda **kw: Minibatches(4, **kw))
    )
    with pytest.raises(
        IteratorValidationError,
        match=rf"{iterator}: data 'default' holds NaN or "
        r'infinite values \(the first at index \(0, 7, 2\)',
    ):
        make(**d)
    it = make(check_finite=False, **d)  # the opt-out for huge data
    assert it.length >= 1
    with pytest.raises(IteratorValidationError, match='check_finite'):
        make(check_finite='no', **d)


@settings(max_examples=40, deadline=None)
@given(
    st.one_of(
        st.just(float('nan')),
        # float32 (the handler's type) must not round it to an id
        st.floats(0, 2.99).filter(lambda v: abs(v - round(v)) > 1e-3),
    )
)
def test_softmax_ce_targets_must_be_whole_class_ids(target):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 2, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(4, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    # check_finite=False: the NaN must reach the layer's own check; a
    # fraction is refused as the data comes in (test_id_inputs.py)
    with pytest.raises(NetworkValidationError, match=r"SoftmaxCE 'Output'.*whole num"):
        net.provide_external_data(
            {'default': np.ones((1, 2, 2)), 'targets': np.array([[[1.0], [target]]])},
            check_finite=False,
        )
        net.forward_pass()


def test_check_works_through_the_handler_interface():
    """Handlers other than NumpyHandler (here a DebugHandler, whose arrays
    are not NumPy arrays) are checked with the handler's own ops."""
    from brainstorm.handlers import DebugHandler, NumpyHandler

    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers('classification', 10, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(20, name='Hid') >> out)
    net.set_handler(DebugHandler(NumpyHandler(np.float64)))
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(steppers.SgdStepper(1e3), verbose=False)
    trainer.add_hook(StopAfterEpoch(50))
    with (
        np.errstate(all='ignore'),
        pytest.raises(NonFiniteError, match="layer 'Hid', buffer 'parameters.W'"),
    ):
        trainer.train(net, Minibatches(16, **data('classification')))
