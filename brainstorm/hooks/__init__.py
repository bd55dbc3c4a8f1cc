"""Hooks: code the Trainer calls during training.

A hook has a ``timescale`` (``'epoch'`` or ``'update'``) and an
``interval``; the trainer calls it whenever the matching count is a multiple
of the interval (also at count 0, before training). A hook returns a value
to log (or None) and raises ``StopIteration`` to stop training.
``log_name`` arguments are dotted paths into ``trainer.logs``, e.g.
``'validation.Accuracy'``.

One module per concern; every hook is imported from ``brainstorm.hooks``:

* ``brainstorm.hooks.base``: the base class :class:`Hook`;
* ``brainstorm.hooks.monitoring``: losses, scores and layer statistics
  (``MonitorLoss``, ``MonitorScores``, ``MonitorLayer*``, ``InfoUpdater``);
* ``brainstorm.hooks.saving``: networks, logs and checkpoints
  (``SaveNetwork``, ``SaveBestNetwork``, ``SaveLogs``, ``SaveLogsCSV``,
  ``SaveCheckpoint``);
* ``brainstorm.hooks.stopping``: when training ends (``StopAfterEpoch``,
  ``EarlyStopper``, ``StopAfterThresholdReached``, ``StopOnNan``,
  ``StopOnSigQuit``);
* ``brainstorm.hooks.schedules``: stepper hyperparameters
  (``ModifyStepperAttribute``, ``ReduceOnPlateau``);
* ``brainstorm.hooks.display``: progress bar and plots
  (``ProgressBar``, ``SavePlot``, ``BokehVisualizer``);
* ``brainstorm.hooks.tensorboard``: TensorBoard event files
  (``SaveLogsTensorBoard``, needs the ``tensorboard`` extra).

In data-parallel training (a
:class:`~brainstorm.training.data_parallel.DataParallel` stepper on several
MPI processes) every rank calls the hooks: the monitors join the figures
of all ranks (sums and counts, so they equal the figures of one process
on all the data), and only rank 0 prints and writes files.
"""

import math
import signal
import sys
from collections import OrderedDict

import numpy as np

import brainstorm.optional as optional
from brainstorm.describable import Describable
from brainstorm.files import get_brainstorm_info, h5py_on_first_use
from brainstorm.hooks.base import Hook
from brainstorm.hooks.display import (
    BokehVisualizer,
    ProgressBar,
    SavePlot,
    progress_bar,
)
from brainstorm.hooks.monitoring import (
    InfoUpdater,
    MonitorLayerDeltas,
    MonitorLayerGradients,
    MonitorLayerInOuts,
    MonitorLayerParameters,
    MonitorLoss,
    MonitorScores,
)
from brainstorm.hooks.saving import (
    LOGS_FILE_FORMAT,
    SaveBestNetwork,
    SaveCheckpoint,
    SaveLogs,
    SaveLogsCSV,
    SaveNetwork,
)
from brainstorm.hooks.schedules import ModifyStepperAttribute, ReduceOnPlateau
from brainstorm.hooks.stopping import (
    EarlyStopper,
    StopAfterEpoch,
    StopAfterThresholdReached,
    StopOnNan,
    StopOnSigQuit,
)
from brainstorm.hooks.tensorboard import SaveLogsTensorBoard
from brainstorm.naming import get_by_path
from brainstorm.structure.network import Network
from brainstorm.tools import evaluate
from brainstorm.training.checkpoint import check_restored_path

# ``h5py``, in Brainstorm 0.5's namespace of this module, is imported when
# first asked for, so that importing brainstorm does not load HDF5
__getattr__ = h5py_on_first_use(__name__)

# math, signal, sys, OrderedDict, h5py, np, optional, Describable, Network,
# evaluate, get_by_path, progress_bar and get_brainstorm_info: the names
# Brainstorm 0.5's module brainstorm/hooks.py imported stay importable from
# here (tests/test_compat_05.py)
__all__ = [
    'Hook',
    'SaveBestNetwork',
    'SaveLogs',
    'SaveNetwork',
    'MonitorLoss',
    'MonitorScores',
    'MonitorLayerParameters',
    'MonitorLayerGradients',
    'MonitorLayerInOuts',
    'MonitorLayerDeltas',
    'EarlyStopper',
    'StopAfterEpoch',
    'StopAfterThresholdReached',
    'StopOnNan',
    'StopOnSigQuit',
    'ProgressBar',
    'ModifyStepperAttribute',
    'ReduceOnPlateau',
    'SaveLogsCSV',
    'SavePlot',
    'SaveCheckpoint',
    'BokehVisualizer',
    'InfoUpdater',
    'SaveLogsTensorBoard',
]
