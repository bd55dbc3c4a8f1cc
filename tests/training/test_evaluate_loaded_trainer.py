"""``evaluate`` on a trainer loaded from a checkpoint, before ``train``.

The hooks got their saved states only when ``train`` continued the
checkpoint, so ``evaluate`` ran them with fresh ones: a ``ReduceOnPlateau``
took every restored log entry as new and cut the learning rate twice (the
resumed run then differed from an uninterrupted one), a ``SaveBestNetwork``
refused with a message blaming the hook order, and a
``SaveLogsTensorBoard`` (whose fresh state from a description was None)
failed with a bare TypeError. The hooks now get their states before
``evaluate`` runs them.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description


def _setup(folder, epochs, *hooks):
    bs.global_rnd.set_seed(3)
    rnd = np.random.RandomState(0)
    x, y = rnd.randn(1, 20, 4), rnd.randint(0, 2, (1, 20, 1))
    inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(bs.hooks.SaveCheckpoint(str(folder / 'run.ckpt')))
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    train = bs.data_iterators.Minibatches(5, default=x, targets=y, shuffle=False)
    valid = bs.data_iterators.Minibatches(
        5,
        default=rnd.randn(1, 10, 4),
        targets=rnd.randint(0, 2, (1, 10, 1)),
        shuffle=False,
    )
    return net, trainer, train, valid


def _plateau():
    # the validation loss of random labels rises: plateaus
    return bs.hooks.ReduceOnPlateau('validation.total_loss', patience=1, factor=0.5)


def test_evaluate_leaves_the_learning_rate_and_the_resumed_run_exact(tmp_path):
    net, trainer, train, valid = _setup(tmp_path, 8, _plateau())
    trainer.train(net, train, valid=valid)
    uninterrupted = net.get('parameters').copy()
    final_rate = trainer.stepper.learning_rate

    net, trainer, train, valid = _setup(tmp_path, 4, _plateau())
    trainer.train(net, train, valid=valid)
    rate = trainer.stepper.learning_rate
    assert rate < 0.5  # the plateau hook has cut it: its state matters

    loaded, net2 = bs.Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    assert loaded.stepper.learning_rate == rate
    results = loaded.evaluate(net2, valid=_setup(tmp_path, 4)[3])
    assert results['validation']['total_loss']
    assert loaded.stepper.learning_rate == rate

    loaded.hooks['StopAfterEpoch'].max_epochs = 8
    _, _, train, valid = _setup(tmp_path, 4)
    loaded.train(net2, train, valid=valid)
    assert loaded.stepper.learning_rate == final_rate
    np.testing.assert_array_equal(net2.get('parameters'), uninterrupted)


def test_evaluate_of_a_mid_epoch_checkpoint_with_save_best_network(tmp_path):
    best = bs.hooks.SaveBestNetwork('validation.total_loss', criterion='min')

    class StopAt14(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr >= 14:
                raise StopIteration

    net, trainer, train, valid = _setup(tmp_path, 4, best)
    trainer.hooks['SaveCheckpoint'].timescale = 'update'
    trainer.hooks['SaveCheckpoint'].interval = 2
    trainer.add_hook(StopAt14(timescale='update'))
    trainer.train(net, train, valid=valid)
    expected = trainer.evaluate(net, valid=_setup(tmp_path, 4)[3])

    loaded, net2 = bs.Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    assert loaded.current_update_nr == 14
    results = loaded.evaluate(net2, valid=_setup(tmp_path, 4)[3])
    assert list(results) == list(expected)


@pytest.mark.parametrize('loaded', [False, True])
def test_a_tensorboard_hook_made_anew_runs(tmp_path, loaded):
    pytest.importorskip('tensorboardX')
    hook = bs.hooks.SaveLogsTensorBoard(
        str(tmp_path / 'tb'), log_names=['validation.total_loss']
    )
    if not loaded:
        again = create_from_description(get_description(hook))
        net, trainer, train, valid = _setup(tmp_path, 2, again)
        trainer.train(net, train, valid=valid)
        assert list(trainer.logs['validation']['total_loss'])
        assert list((tmp_path / 'tb').iterdir())
        return
    net, trainer, train, valid = _setup(tmp_path, 2, hook)
    trainer.train(net, train, valid=valid)
    before = sorted(p.stat().st_size for p in (tmp_path / 'tb').iterdir())
    restored, net2 = bs.Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    restored.evaluate(net2, valid=_setup(tmp_path, 2)[3])
    # the steps written before the checkpoint are not written again
    after = sorted(p.stat().st_size for p in (tmp_path / 'tb').iterdir())
    assert sum(after) - sum(before) < 200, (before, after)
