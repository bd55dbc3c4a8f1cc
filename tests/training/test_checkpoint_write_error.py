"""A checkpoint that cannot be written ends train() like any hook's write
error: FileWriteError naming the file, with a note naming the hook, and the
previous checkpoint kept.

The write is refused the way the operating system refuses it: a hook sets a
file-size limit (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored so ``write``
fails with ``EFBIG``) in a fresh process.
"""

import errno
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='RLIMIT_FSIZE semantics (Linux)'
)

CHILD = textwrap.dedent(
    """
    import json, resource, signal, sys
    import brainstorm as bs
    from brainstorm.data_iterators import Undivided
    from brainstorm.hooks import Hook, SaveCheckpoint, StopAfterEpoch
    from tests.training.nets import xor_data, xor_net

    path, timescale = sys.argv[1], sys.argv[2]


    class LimitFileSizeAtCount2(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if (update_nr if self.timescale == 'update' else epoch_nr) == 2:
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(
                    resource.RLIMIT_FSIZE, (2000, resource.RLIM_INFINITY))


    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.add_hook(LimitFileSizeAtCount2(timescale=timescale))
    trainer.add_hook(SaveCheckpoint(path, name='my_checkpoints', timescale=timescale))
    trainer.add_hook(StopAfterEpoch(5))
    result = {'error': None}
    try:
        trainer.train(xor_net(), Undivided(**xor_data()))
    except Exception as err:
        result = {
            'error': type(err).__name__,
            'errno': getattr(err, 'errno', None),
            'filename': getattr(err, 'filename', None),
            'notes': getattr(err, '__notes__', []),
        }
    result['counts'] = [trainer.current_epoch_nr, trainer.current_update_nr]
    # the process goes on: lift the limit and resume the kept checkpoint
    resource.setrlimit(
        resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    kept, _ = bs.Trainer.from_checkpoint(path)
    result['kept'] = [kept.current_epoch_nr, kept.current_update_nr]
    print(json.dumps(result))
    """
)


@pytest.mark.parametrize('timescale', ['epoch', 'update'])
def test_a_failed_checkpoint_write_is_noted_with_the_hook(tmp_path, timescale):
    path = tmp_path / 'run.ckpt'
    done = subprocess.run(
        [sys.executable, '-c', CHILD, str(path), timescale],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result['error'] == 'FileWriteError', result
    assert result['errno'] == errno.EFBIG, result
    assert result['filename'] == str(path), result
    # one update per epoch: the write at count 2 is refused
    assert result['counts'] == [2, 2], result
    expected = (
        f"Raised in hook 'my_checkpoints' (SaveCheckpoint) during its "
        f'{timescale} call (epoch 2, update 2).'
    )
    assert expected in result['notes'], result['notes']
    # the checkpoint of count 1 is kept, whole, and no temporary file is left
    assert result['kept'] == [1, 1], result
    assert os.listdir(tmp_path) == ['run.ckpt']
