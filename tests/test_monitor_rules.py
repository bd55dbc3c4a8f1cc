"""Rules of the monitors (brainstorm/hooks/monitoring.py) that the logs,
SaveBestNetwork and EarlyStopper act on: each stated at its edge, so that
mutation testing (tools/mutation.py) finds no gap."""

import types

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Undivided
from brainstorm.errors import DescriptionError, TrainingValidationError
from brainstorm.hooks import (
    InfoUpdater,
    MonitorLayerDeltas,
    MonitorLayerGradients,
    MonitorLayerInOuts,
    MonitorLayerParameters,
    MonitorLoss,
    MonitorScores,
    StopAfterEpoch,
)
from brainstorm.scorers import Accuracy
from brainstorm.training import SgdStepper, Trainer
from brainstorm.training.data_parallel import DataParallel
from tests.training.nets import xor_data, xor_net

LAYER_MONITORS = [
    MonitorLayerParameters,
    MonitorLayerGradients,
    MonitorLayerInOuts,
    MonitorLayerDeltas,
]


@pytest.mark.parametrize(
    'make',
    [
        lambda: MonitorLoss(''),
        lambda: MonitorScores('', [Accuracy()]),
        *[(lambda cls=cls: cls('')) for cls in LAYER_MONITORS],
    ],
    ids=['MonitorLoss', 'MonitorScores', *[c.__name__ for c in LAYER_MONITORS]],
)
def test_an_empty_iterator_or_layer_name_is_refused(make):
    """An empty name names no iterator and no layer (and would make a
    layer monitor's default name end in '_')."""
    with pytest.raises(TrainingValidationError, match='empty'):
        make()


class OtherRankComm:
    """Rank 0 of 2; rank 1 evaluated one batch of 4 samples to a loss of
    ``other_loss``. No collective but allgather is called."""

    def __init__(self, other_loss):
        self.other_loss = other_loss

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2

    def allgather(self, obj):
        other = {name: [(4.0, self.other_loss)] for name in obj}
        return [obj, other]


def test_a_loss_monitor_reports_the_figure_over_all_ranks():
    """In a data-parallel run the monitor's figure is that of the data of
    all ranks (the batch-size weighted mean), on every rank: start takes
    the run's communicator from the stepper."""
    net = xor_net()
    data = Undivided(**xor_data())
    alone = MonitorLoss('valid')
    alone.start(net, SgdStepper(), False, {'valid': data})
    local = alone(0, 0, net, None, {})['total_loss']

    hook = MonitorLoss('valid')
    stepper = DataParallel(SgdStepper(), comm=OtherRankComm(local + 10.0))
    hook.start(net, stepper, False, {'valid': data})
    joined = hook(0, 0, net, stepper, {})
    assert joined['total_loss'] == pytest.approx(local + 5.0)

    # reused in a single-process run, it reports this process's figure
    hook.start(net, SgdStepper(), False, {'valid': data})
    assert hook(0, 0, net, None, {})['total_loss'] == pytest.approx(local)


@pytest.mark.parametrize('cls', LAYER_MONITORS, ids=lambda c: c.__name__)
def test_a_verbose_trainer_prints_a_layer_monitors_figures(capsys, cls):
    """The trainer prints a hook's result where the hook's run verbosity
    (set by start, from the trainer's) says so: a layer monitor of a
    verbose trainer is printed, one of a quiet trainer is not."""
    for verbose in (True, False):
        trainer = Trainer(SgdStepper(0.1), verbose=verbose)
        trainer.add_hook(cls('Hid', name='mon'))
        trainer.add_hook(StopAfterEpoch(1))
        capsys.readouterr()
        trainer.train(xor_net(), Undivided(**xor_data()))
        printed = [
            line for line in capsys.readouterr().out.splitlines() if 'mon >> ' in line
        ]
        assert bool(printed) is verbose
        assert trainer.hooks['mon'].run_verbosity is verbose


def test_a_loss_monitor_of_a_verbose_trainer_is_printed(capsys):
    trainer = Trainer(SgdStepper(0.1), verbose=True)
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(xor_net(), Undivided(**xor_data()), valid=Undivided(**xor_data()))
    assert 'validation >> total_loss' in capsys.readouterr().out


def test_an_info_updater_without_a_run_says_so():
    """Recreated from a description an InfoUpdater has no run object (it is
    no part of a description or checkpoint): its call says what to do,
    as a validation error, and changes nothing."""
    hook = bs.create_from_description(
        bs.get_description(InfoUpdater(types.SimpleNamespace(info={})))
    )
    assert hook.run is None
    with pytest.raises(TrainingValidationError, match=r'no run object.*\.run'):
        hook(1, 2, xor_net(), None, {'validation': {'total_loss': [1.0]}})


def test_a_description_cannot_give_an_info_updater_a_run():
    """The run object is checked at construction only: a description that
    names one is refused for an unknown key, never restored."""
    description = bs.get_description(InfoUpdater(types.SimpleNamespace(info={})))
    for value in ({'info': {}}, None, 5):
        with pytest.raises(DescriptionError, match="unknown key 'run'"):
            bs.create_from_description(dict(description, run=value))


def test_an_info_updater_sets_the_parameter_count_once():
    """Each call sets the counters and the logs (NumPy numbers as Python
    numbers); nr_parameters is set if absent and never overwritten."""
    run = types.SimpleNamespace(info={})
    hook = InfoUpdater(run)
    net = xor_net()
    hook(2, 7, net, None, {'validation': {'total_loss': [np.float64(0.5)]}})
    assert run.info == {
        'epoch_nr': 2,
        'update_nr': 7,
        'logs': {'validation': {'total_loss': [0.5]}},
        'nr_parameters': int(net.buffer.parameters.size),
    }
    assert type(run.info['logs']['validation']['total_loss'][0]) is float
    run.info['nr_parameters'] = -1
    hook(3, 8, net, None, {})
    assert (run.info['epoch_nr'], run.info['update_nr']) == (3, 8)
    assert run.info['logs'] == {}
    assert run.info['nr_parameters'] == -1
