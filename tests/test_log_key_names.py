"""Hook and scorer names are log keys: a '.' in them is refused at once.

Before, ``MonitorLoss('valid', name='val.x')`` was accepted and training
failed an epoch later with an error listing ``'val.x.total_loss'`` as an
available log.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import ValidationError


@pytest.mark.parametrize(
    'make',
    [
        lambda: bs.hooks.MonitorLoss('valid', name='val.x'),
        lambda: bs.hooks.MonitorScores('valid', [bs.scorers.Accuracy()], name='v.'),
        lambda: bs.hooks.SaveBestNetwork('validation.total_loss', name='.best'),
        lambda: bs.hooks.StopAfterEpoch(3, name='stop.now'),
        lambda: bs.scorers.Accuracy(name='acc.top1'),
        lambda: bs.scorers.Hamming(name='a.b'),
    ],
)
def test_a_dotted_name_is_refused_at_construction(make):
    with pytest.raises(ValidationError, match=r"without '\.'.*Received: name="):
        make()


def test_a_dotted_name_is_refused_when_a_description_is_restored():
    description = get_description(bs.hooks.MonitorLoss('valid', name='val_x'))
    description['__name__'] = 'val.x'
    with pytest.raises(ValidationError, match=r"without '\.'"):
        create_from_description(description)


@pytest.mark.parametrize('name', ['val.x', ''])
def test_a_hook_renamed_after_construction_is_refused_by_add_hook(name):
    hook = bs.hooks.StopAfterEpoch(3)
    hook.__name__ = name
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    with pytest.raises(ValidationError, match=r"without '\.'.*Received: __name__="):
        trainer.add_hook(hook)
    assert not trainer.hooks


def test_names_without_dots_still_train_and_log_where_the_path_says():
    bs.global_rnd.set_seed(3)
    x = np.random.RandomState(0).rand(1, 6, 2)
    y = np.zeros((1, 6, 1))
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1)
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    trainer.add_hook(
        bs.hooks.MonitorScores(
            'valid',
            [bs.scorers.Accuracy(name='acc_1', out_name='Output.outputs.predictions')],
            name='val_x',
        )
    )
    trainer.add_hook(bs.hooks.SaveBestNetwork('val_x.acc_1', name='best'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    data = bs.data_iterators.Minibatches(3, default=x, targets=y)
    trainer.train(net, data, valid=data)
    assert len(trainer.logs['val_x']['acc_1']) == 3
