"""Hooks: code the Trainer calls during training (monitoring, saving,
stopping, changing stepper attributes).

A hook has a ``timescale`` (``'epoch'`` or ``'update'``) and an
``interval``; the trainer calls it whenever the matching count is a multiple
of the interval (also at count 0, before training). A hook returns a value
to log (or None) and raises ``StopIteration`` to stop training.
``log_name`` arguments are dotted paths into ``trainer.logs``, e.g.
``'validation.Accuracy'``.

In data-parallel training (a
:class:`~brainstorm.training.data_parallel.DataParallel` stepper on several
MPI processes) every rank calls the hooks: the monitors join the figures
of all ranks (sums and counts, so they equal the figures of one process
on all the data), and only rank 0 prints and writes files.
"""

from __future__ import annotations

import csv
import importlib.machinery
import inspect
import io
import math
import os
import re
import signal
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from brainstorm.__about__ import install_hint
from brainstorm._logging import get_logger
from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Callable,
    Check,
    Choice,
    Instance,
    Int,
    ListOf,
    Optional,
    Real,
    Str,
    Writable,
)
from brainstorm.describable import Describable
from brainstorm.scorers import Accuracy, Scorer
from brainstorm.tools import evaluate
from brainstorm.training.data_parallel import (
    communicator_of,
    is_root_process,
)
from brainstorm.training.schedules import Linear, Schedule
from brainstorm.training.utils import check_int, check_number, log_counters
from brainstorm.utils import (
    TrainingValidationError,
    UnknownNameError,
    get_brainstorm_info,
    get_by_path,
    write_atomically,
)

__all__ = ['Hook', 'SaveBestNetwork', 'SaveLogs', 'SaveNetwork',
           'MonitorLoss', 'MonitorScores', 'MonitorLayerParameters',
           'MonitorLayerGradients', 'MonitorLayerInOuts',
           'MonitorLayerDeltas', 'EarlyStopper', 'StopAfterEpoch',
           'StopAfterThresholdReached', 'StopOnNan', 'StopOnSigQuit',
           'ProgressBar', 'ModifyStepperAttribute', 'ReduceOnPlateau',
           'SaveLogsCSV', 'SavePlot', 'SaveCheckpoint', 'BokehVisualizer',
           'InfoUpdater']

_log = get_logger('hooks')

LOGS_FILE_FORMAT = b'Logs file v1.0'

#: Log names: one dotted name or a list of them.
_NAMES = AnyOf(ListOf(Str(nonempty=True)), Str(nonempty=True))


# ------------------------------------------------------------- helpers ----

def _leaf_paths(logs: Mapping, prefix: str = '') -> list:
    """Dotted paths of all leaves of nested logs, in insertion order."""
    paths = []
    for key, value in logs.items():
        if isinstance(value, Mapping):
            paths.extend(_leaf_paths(value, f'{prefix}{key}.'))
        else:
            paths.append(prefix + key)
    return paths


def _stats(array: np.ndarray) -> OrderedDict:
    return OrderedDict([('min', float(array.min())),
                        ('avg', float(array.mean())),
                        ('max', float(array.max()))])


def _view_stats(net, view) -> OrderedDict:
    result = OrderedDict()
    for key, array in view.items():
        if hasattr(array, 'items'):
            continue
        values = net.handler.get_numpy_copy(array)
        if values.size:
            result[key] = _stats(values)
    return result


# file names Python (or site) would import or run from a folder on sys.path
_IMPORTABLE_SUFFIXES = frozenset(
    suffix.lower() for suffix in importlib.machinery.all_suffixes()) | {
    '.py', '.pyc', '.pyo', '.pyw', '.pyd', '.so', '.pth', '.pyz', '.zip',
    '.egg', '.whl'}
_IMPORTABLE_NAMES = frozenset({'sitecustomize', 'usercustomize', '__init__',
                               '__main__', '__pycache__'})


def check_restored_path(owner: str, filename, folders=()) -> None:
    """Check a file name that a hook restored from a file will write to.

    The path (relative paths taken from the working folder, symbolic links
    resolved) must lead inside the current working folder or one of
    ``folders``, have no hidden (``.``) part below that folder, and not
    name a file Python would import (``*.py``, ``*.pyc``, ``*.so``,
    ``*.pth``, ``sitecustomize``...).

    Args:
        owner: names the hook, for messages.
        filename: the restored path.
        folders: further folders writes may go to (the checkpoint's).

    Raises:
        TrainingValidationError: naming ``owner``, the path and the rule.
    """
    def refuse(rule: str):
        raise TrainingValidationError(
            f'{owner}: refusing to write to {filename!r}: {rule}. If you '
            'wrote this file yourself, load it with trusted=True, or replace '
            'the hook.')

    if not isinstance(filename, str) or not filename or '\0' in filename:
        refuse('a file name must be a non-empty str')
    name = re.split(r'[\\/]', filename)[-1].lower()
    if any(name.endswith(suffix) for suffix in _IMPORTABLE_SUFFIXES) or \
            name.split('.')[0] in _IMPORTABLE_NAMES:
        refuse('it names a file Python could import')
    target = os.path.realpath(filename)
    roots = [os.path.realpath(folder) for folder in (os.getcwd(), *folders)]
    for root in roots:
        if os.path.commonpath([root, target]) == root and target != root:
            below = os.path.relpath(target, root).split(os.sep)
            if any(part.startswith('.') for part in below):
                refuse('it names a hidden file or folder')
            return
    refuse(f'it leads outside the working folder and the checkpoint\'s '
           f'folder {roots}')


def _check_criterion(owner: str, criterion) -> None:
    if criterion not in ('min', 'max'):
        raise TrainingValidationError(
            f"{owner}: criterion must be 'min' or 'max'. Received: "
            f'criterion={criterion!r}')


def _is_better(value, best, criterion: str) -> bool:
    return value < best if criterion == 'min' else value > best


# ---------------------------------------------------------------- base ----

class Hook(Describable):
    """Base class of all hooks.

    Args:
        name: the hook's name (key in ``trainer.hooks`` and ``logs``);
            default: the class name.
        timescale: ``'epoch'`` or ``'update'``.
        interval: call every ``interval`` epochs/updates (int >= 1).
        verbose: whether to print; None follows the trainer.

    Attributes:
        priority: set by ``Trainer.add_hook`` (order of the hooks).
        run_verbosity: the verbosity in effect, set by :meth:`start`.
        comm: set by :meth:`start`: the MPI communicator of a data-parallel
            run, else None.
    """

    __arguments__ = {
        'name': Arg(Optional(Str(nonempty=True)), default=None,
                    attr='__name__'),
        'timescale': Arg(Choice('epoch', 'update'), default='epoch'),
        'interval': Arg(Int(1), default=1),
        'verbose': Arg(Optional(Bool()), default=None),
        'priority': Arg(Int(0), state=True),
    }

    __undescribed__ = {'run_verbosity': None, 'comm': None}
    __default_values__ = {'timescale': 'epoch', 'interval': 1,
                          'verbose': None}

    def __init__(self, name: str | None = None, timescale: str = 'epoch',
                 interval: int = 1, verbose: bool | None = None):
        owner = type(self).__name__
        if timescale not in ('epoch', 'update'):
            raise TrainingValidationError(
                f"{owner}: timescale must be 'epoch' or 'update'. Received: "
                f'timescale={timescale!r}')
        check_int(owner, 'interval', interval, low=1)
        if name is not None and not isinstance(name, str):
            raise TrainingValidationError(
                f'{owner}: name must be a str or None. Received: {name!r}')
        self.timescale = timescale
        self.interval = interval
        self.__name__ = name or owner
        self.priority = 0
        self.verbose = verbose
        self.run_verbosity: bool | None = None
        self.comm = None

    def start(self, net, stepper, verbose: bool, named_data_iters: dict
              ) -> None:
        """Called by the trainer before training; sets ``run_verbosity``
        (False on ranks other than 0) and ``comm``."""
        self.comm = communicator_of(stepper)
        self.run_verbosity = (verbose if self.verbose is None
                              else self.verbose) and self.is_root

    @property
    def is_root(self) -> bool:
        """Whether this process prints and writes files (True, except on
        the ranks other than 0 of a data-parallel run)."""
        return is_root_process(getattr(self, 'comm', None))

    def message(self, msg: str) -> None:
        """Print ``"<name> >> msg"`` if the hook is verbose."""
        if self.run_verbosity:
            _log.info(f'{self.__name__} >> {msg}')

    def __call__(self, epoch_nr: int, update_nr: int, net, stepper,
                 logs: dict):
        """Run the hook; return a value to log or None, or raise
        StopIteration to stop training."""
        raise NotImplementedError

    def get_state(self) -> dict:
        """State to keep in checkpoints: name -> NumPy array (or number)."""
        return {}

    def set_state(self, state: dict) -> None:
        """Restore a state from :meth:`get_state`."""

    def _get_log(self, logs: dict, log_name: str, epoch_nr: int):
        """The log at ``log_name``, or None while it may not exist yet (at
        epoch 0, and during the first epoch for update hooks).

        Raises:
            UnknownNameError: if it still does not exist, listing the logs.
        """
        try:
            return get_by_path(logs, log_name)
        except KeyError:
            if epoch_nr == 0 or (self.timescale == 'update' and epoch_nr <= 1):
                return None
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': there is no log "
                f"'{log_name}' (epoch {epoch_nr}). Available logs: "
                f'{_leaf_paths(logs)}') from None

    def __repr__(self):
        return f"<{type(self).__name__} '{self.__name__}'>"


# ------------------------------------------------------------- saving -----

class SaveBestNetwork(Hook):
    """Save the network whenever a log reaches a new best value.

    The last entry of the log must be strictly better than all earlier
    ones. Without ``filename`` the parameters are kept in memory
    (``self.parameters``).

    Args:
        log_name: dotted path of the log to watch.
        filename: HDF5 file to save to (None: keep in memory).
        criterion: ``'max'`` or ``'min'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy'))
        >>> list(trainer.hooks)
        ['SaveBestNetwork']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'filename': Arg(Optional(Str(nonempty=True)), default=None),
        'criterion': Arg(Choice('max', 'min'), default='max'),
    }

    __undescribed__ = {'parameters': None}

    def __init__(self, log_name: str, filename: str | None = None,
                 criterion: str = 'max', name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        _check_criterion(type(self).__name__, criterion)
        self.log_name = log_name
        self.filename = filename
        self.criterion = criterion
        self.parameters: np.ndarray | None = None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        log = self._get_log(logs, self.log_name, epoch_nr)
        if not log:
            return None
        value = log[-1]
        earlier = [v for v in log[:-1] if not math.isnan(v)]
        if math.isnan(value):
            return None
        if earlier:
            best = min(earlier) if self.criterion == 'min' else max(earlier)
            if not _is_better(value, best, self.criterion):
                return None
        if self.filename is not None:
            self.message(f'{self.log_name} improved to {value:.6g}; saving '
                         f"network to '{self.filename}'.")
            if self.is_root:
                net.save_as_hdf5(self.filename)
        else:
            self.message(f'{self.log_name} improved to {value:.6g}; keeping '
                         'the parameters.')
            self.parameters = net.get('parameters')
        return None

    def load_best_network(self):
        """The best network: a Network loaded from ``filename``, or (without
        filename) the cached parameter array."""
        if self.filename is not None:
            from brainstorm.structure.network import Network
            return Network.from_hdf5(self.filename)
        return self.parameters

    def get_state(self) -> dict:
        return {} if self.parameters is None else \
            {'parameters': self.parameters}

    def set_state(self, state: dict) -> None:
        if 'parameters' in state:
            self.parameters = np.array(state['parameters'])


class _FileHook(Hook):
    """A hook that writes to ``filename``."""

    __arguments__ = {'filename': Arg(Str(nonempty=True))}

    def __init__(self, filename: str, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1):
        super().__init__(name, timescale, interval)
        self.filename = filename


class SaveLogs(_FileHook):
    """Write all logs to an HDF5 file (rewritten each time).

    The file has the attributes ``info`` and ``format = b'Logs file v1.0'``;
    nested dicts become groups, lists become datasets.

    Args:
        filename: the HDF5 file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveLogs('logs.hdf5'))
        >>> list(trainer.hooks)
        ['SaveLogs']
    """

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self.is_root:
            return None
        import h5py

        def write_group(group, entries):
            for key, value in entries.items():
                if isinstance(value, Mapping):
                    write_group(group.create_group(key), value)
                else:
                    group.create_dataset(key, data=np.asarray(value))

        def write(tmp):
            with h5py.File(tmp, 'w') as f:
                f.attrs['info'] = np.bytes_(get_brainstorm_info())
                f.attrs['format'] = np.bytes_(LOGS_FILE_FORMAT)
                write_group(f, logs)

        write_atomically(self.filename, write)
        return None


class SaveNetwork(_FileHook):
    """Save the network to an HDF5 file (overwritten each time).

    Args:
        filename: the HDF5 file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveNetwork('net.hdf5', interval=5))
        >>> list(trainer.hooks)
        ['SaveNetwork']
    """

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if self.is_root:
            net.save_as_hdf5(self.filename)
        return None

    def load_network(self):
        """Load the last saved network."""
        from brainstorm.structure.network import Network
        return Network.from_hdf5(self.filename)


class SaveCheckpoint(_FileHook):
    """Write a checkpoint for exact resumption of the training run.

    The checkpoint (one HDF5 file, written atomically) holds the network,
    the stepper state, the trainer's counters and logs, hook states and all
    random states involved (global, network, handler, data iterators). It
    is written after all hooks due at the same moment have run. Continue
    with ``trainer, net = Trainer.from_checkpoint(filename)`` and
    ``trainer.train(net, train_iter, **named_iters)`` with iterators built
    the same way.

    Args:
        filename: the checkpoint file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveCheckpoint('run.ckpt'))
        >>> list(trainer.hooks)
        ['SaveCheckpoint']
    """

    def __init__(self, filename: str, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1):
        super().__init__(filename, name, timescale, interval)
        if not isinstance(filename, str) or not filename:
            raise TrainingValidationError(
                f'SaveCheckpoint: filename must be a non-empty str. '
                f'Received: {filename!r}')

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        # The trainer writes the file once every hook of this call ran.
        return None


class SaveLogsCSV(Hook):
    """Write logs to a CSV file (rewritten each time).

    The first two columns are ``epoch`` and ``update``; then one column per
    log (dotted name). Each row holds the entries logged at that epoch and
    update (logs are aligned by when they were logged, not by position:
    monitors start at epoch 0, ``rolling_training`` at epoch 1); a log
    without an entry there leaves the cell empty.

    Args:
        filename: the CSV file.
        log_names: dotted log names to write (None: all).
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveLogsCSV('logs.csv'))
        >>> list(trainer.hooks)
        ['SaveLogsCSV']
    """

    __arguments__ = {
        'filename': Arg(Str(nonempty=True)),
        'log_names': Arg(Optional(_NAMES), default=None),
    }

    def __init__(self, filename: str, log_names=None, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1):
        super().__init__(name, timescale, interval)
        self.filename = filename
        self.log_names = [log_names] if isinstance(log_names, str) else \
            (None if log_names is None else list(log_names))

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self.is_root:
            return None
        names = self.log_names if self.log_names is not None else \
            _leaf_paths(logs)
        cells = OrderedDict()  # (epoch, update) -> {column: value}
        for column, log_name in enumerate(names):
            log = self._get_log(logs, log_name, epoch_nr)
            if log is None:
                continue
            epochs, updates = log_counters(log)
            for value, epoch, update in zip(log, epochs, updates):
                cells.setdefault((epoch, update), {})[column] = value

        def order(key):
            epoch, update = key
            return (epoch, -1 if update is None else update)

        text = io.StringIO()
        writer = csv.writer(text, lineterminator='\n')
        writer.writerow(['epoch', 'update'] + list(names))
        for key in sorted(cells, key=order):
            row = cells[key]
            writer.writerow(
                ['' if k is None else k for k in key] +
                [_csv_cell(row[c]) if c in row else ''
                 for c in range(len(names))])

        def write(tmp):
            with open(tmp, 'w', newline='') as f:
                f.write(text.getvalue())

        write_atomically(self.filename, write)
        return None


def _csv_cell(value) -> str:
    if isinstance(value, (int, float, np.number)) and \
            not isinstance(value, bool):
        return repr(float(value))
    return str(value)


def _quantity(log_name: str) -> str:
    """The kind of quantity a log holds, for grouping plots: every loss
    shares one panel, each other score (``Accuracy``...) has its own."""
    leaf = log_name.rsplit('.', 1)[-1]
    return 'loss' if 'loss' in leaf.lower() else leaf


class SavePlot(Hook):
    """Save a PNG plot of some logs (needs matplotlib: ``pip install
    'brainstorm-nn[plot]'``).

    Each entry is drawn at the epoch (or, for ``timescale='update'``, the
    update) it was logged at. Logs of one kind of quantity share a panel
    (all losses; each score such as ``Accuracy`` on its own), with labelled
    axes and a legend.

    Args:
        filename: the PNG file (rewritten each time).
        log_names: dotted names of the logs to plot (one line each).
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SavePlot(
        ...     'loss.png', ['rolling_training.total_loss']))
        >>> list(trainer.hooks)
        ['SavePlot']
    """

    __arguments__ = {
        'filename': Arg(Str(nonempty=True)),
        'log_names': Arg(_NAMES),
    }

    def __init__(self, filename: str, log_names, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1):
        super().__init__(name, timescale, interval)
        self.filename = filename
        self.log_names = [log_names] if isinstance(log_names, str) else \
            list(log_names)
        if not self.log_names:
            raise TrainingValidationError(
                'SavePlot: log_names must name at least one log. Received: '
                f'{log_names!r}')

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError(
                f"SavePlot '{self.__name__}' needs matplotlib. Install it "
                f"with: {install_hint('plot')}") from None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self.is_root:
            return None
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator
        panels = OrderedDict()  # quantity -> [(log name, x, y)]
        for log_name in self.log_names:
            log = self._get_log(logs, log_name, epoch_nr)
            if not log:
                continue
            epochs, updates = log_counters(log)
            x = epochs if self.timescale == 'epoch' or None in updates \
                else updates
            panels.setdefault(_quantity(log_name), []).append(
                (log_name, np.asarray(x, dtype=float),
                 np.asarray(log, dtype=float)))
        figure = Figure(figsize=(7, 3 * max(1, len(panels))))
        FigureCanvasAgg(figure)
        for i, (quantity, lines) in enumerate(panels.items()):
            axes = figure.add_subplot(len(panels), 1, i + 1)
            for log_name, x, y in lines:
                axes.plot(x, y, marker='.', label=log_name)
            axes.set_xlabel(self.timescale)
            axes.xaxis.set_major_locator(MaxNLocator(integer=True))
            axes.set_ylabel(quantity)
            axes.grid(True, alpha=0.3)
            axes.legend(loc='best')
        figure.tight_layout()

        def write(tmp):
            figure.savefig(tmp, format='png')

        write_atomically(self.filename, write)
        return None


class BokehVisualizer(Hook):
    """Write the monitored logs as an interactive standalone HTML page
    (needs bokeh: ``pip install "brainstorm-nn[bokeh]"``).

    The page embeds bokeh's JavaScript, so it opens offline. Each entry is
    drawn at the epoch (or update) it was logged at; logs of one kind of
    quantity share a panel (as in :class:`SavePlot`).

    Args:
        log_names: dotted names of the logs to draw (one line each).
        filename: the HTML file (rewritten each time).
        timescale, interval, name, verbose: see :class:`Hook`.
    """

    __arguments__ = {
        'log_names': Arg(_NAMES),
        'filename': Arg(Str(nonempty=True), default='bokeh_visualizer.html'),
    }

    def __init__(self, log_names, filename: str = 'bokeh_visualizer.html',
                 timescale: str = 'epoch', interval: int = 1,
                 name: str | None = None, verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        self.log_names = [log_names] if isinstance(log_names, str) else \
            list(log_names)
        if not self.log_names or \
                not all(isinstance(n, str) for n in self.log_names):
            raise TrainingValidationError(
                'BokehVisualizer: log_names must name at least one log. '
                f'Received: {log_names!r}')
        if not isinstance(filename, str) or not filename:
            raise TrainingValidationError(
                'BokehVisualizer: filename must be a non-empty str. '
                f'Received: {filename!r}')
        self.filename = filename

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        _import_bokeh()

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self.is_root:
            return None
        _import_bokeh()
        from bokeh.embed import file_html
        from bokeh.layouts import column
        from bokeh.palettes import Category10_10
        from bokeh.plotting import figure
        from bokeh.resources import INLINE
        panels = OrderedDict()
        for log_name in self.log_names:
            log = self._get_log(logs, log_name, epoch_nr)
            if not log:
                continue
            epochs, updates = log_counters(log)
            x = epochs if self.timescale == 'epoch' or None in updates \
                else updates
            panels.setdefault(_quantity(log_name), []).append(
                (log_name, [float(v) for v in x], [float(v) for v in log]))
        plots = []
        for quantity, lines in panels.items():
            plot = figure(title=quantity, x_axis_label=self.timescale,
                          y_axis_label=quantity, height=300,
                          sizing_mode='stretch_width',
                          tools='pan,wheel_zoom,box_zoom,reset,save,hover')
            for i, (log_name, x, y) in enumerate(lines):
                color = Category10_10[i % 10]
                plot.line(x, y, legend_label=log_name, color=color,
                          line_width=2)
                plot.scatter(x, y, legend_label=log_name, color=color)
            plot.legend.click_policy = 'hide'
            plots.append(plot)
        html = file_html(column(*plots, sizing_mode='stretch_width'),
                         INLINE, title=f'brainstorm: {self.__name__}')

        def write(tmp):
            with open(tmp, 'w', encoding='utf-8') as f:
                f.write(html)

        write_atomically(self.filename, write)
        return None


def _import_bokeh():
    from brainstorm import optional
    if not optional.has_bokeh:
        raise ImportError(
            'BokehVisualizer needs bokeh. Install it with: '
            f'{optional.install_hint("bokeh")}')


class _RunWithInfo(Check):
    """A run object with an ``info`` dict (e.g. a sacred Run)."""

    expected = "an object with an 'info' attribute that is a dict"
    invalid_examples = (5, 'run', None)

    @property
    def example(self) -> object:
        return types.SimpleNamespace(info={})

    def normalize(self, value: object) -> object:
        if not isinstance(getattr(value, 'info', None), dict):
            raise TypeError
        return value


class InfoUpdater(Hook):
    """Write the training progress into a run object's ``info`` dict (as
    Brainstorm 0.5 did for sacred runs; any object with an ``info`` dict
    works, sacred is not needed).

    Each call sets ``info['epoch_nr']``, ``info['update_nr']``,
    ``info['logs']`` (a plain copy of the logs) and, once,
    ``info['nr_parameters']``.

    Args:
        run: an object with an ``info`` attribute that is a dict.
        name, timescale, interval: see :class:`Hook`.
    """

    __undescribed__ = {'run': None}
    __arguments__ = {'run': Arg(_RunWithInfo(), init_only=True)}

    def __init__(self, run, name: str | None = None, timescale: str = 'epoch',
                 interval: int = 1):
        super().__init__(name, timescale, interval)
        if not isinstance(getattr(run, 'info', None), dict):
            raise TrainingValidationError(
                "InfoUpdater: run must have an 'info' attribute that is a "
                f'dict. Received: {run!r}')
        self.run = run

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if self.run is None:
            # the run object is not part of a description or checkpoint
            raise TrainingValidationError(
                f"InfoUpdater '{self.__name__}': no run object; set its "
                '.run after recreating it from a description.')
        info = self.run.info
        info['epoch_nr'] = epoch_nr
        info['update_nr'] = update_nr
        info['logs'] = _plain_logs(logs)
        info.setdefault('nr_parameters', int(net.buffer.parameters.size))
        return None


def _plain_logs(logs):
    if isinstance(logs, Mapping):
        return {key: _plain_logs(value) for key, value in logs.items()}
    # NumPy scalars become Python numbers, so the info stays JSON-able
    return [v.item() if isinstance(v, np.generic) else v for v in logs]


# ---------------------------------------------------------- monitoring ----

class MonitorLoss(Hook):
    """Log the losses of the network on a data set.

    Args:
        iter_name: the name of a data iterator given to ``trainer.train``
            (only the name is kept in the trainer's description).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLoss('valid_getter', name='validation'))
        >>> list(trainer.hooks)
        ['validation']
    """

    __arguments__ = {'iter_name': Arg(Str(nonempty=True))}

    __undescribed__ = {'iter': None}

    def __init__(self, iter_name: str, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        self.iter_name = iter_name
        self.iter = None

    def start(self, net, stepper, verbose, named_data_iters):
        """Take the iterator ``iter_name`` from ``named_data_iters``.

        Raises:
            UnknownNameError: (a KeyError) if there is no such iterator.
        """
        super().start(net, stepper, verbose, named_data_iters)
        if self.iter_name not in named_data_iters:
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': no data iterator "
                f"named '{self.iter_name}'. Available: "
                f'{sorted(named_data_iters)} (pass it to trainer.train as '
                f'{self.iter_name}=...)')
        self.iter = named_data_iters[self.iter_name]

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return evaluate(net, self.iter, comm=self.comm)


class MonitorScores(MonitorLoss):
    """Log the losses and scores of the network on a data set.

    Args:
        iter_name: the name of a data iterator given to ``trainer.train``.
        scorers: the scorers (e.g. ``[Accuracy()]``).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorScores(
        ...     'valid_getter', [bs.scorers.Accuracy()], name='validation'))
        >>> list(trainer.hooks)
        ['validation']
    """

    __arguments__ = {
        'scorers': Arg(ListOf(Instance(Scorer, example=Accuracy))),
    }

    def __init__(self, iter_name: str, scorers, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(iter_name, name, timescale, interval, verbose)
        self.scorers = list(scorers)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return evaluate(net, self.iter, self.scorers, comm=self.comm)


class _MonitorLayer(Hook):

    __arguments__ = {'layer_name': Arg(Str(nonempty=True))}

    prefix = ''

    def __init__(self, layer_name: str, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name or f'{self.prefix}_{layer_name}', timescale,
                         interval, verbose)
        self.layer_name = layer_name

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        if self.layer_name not in net.layers:
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': the network has "
                f"no layer '{self.layer_name}'. Layers: {list(net.layers)}")


class MonitorLayerParameters(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of each parameter of a layer, and for
    parameters with 2 or more dimensions also ``min/avg/max_L2_norm`` of
    the L2 norms taken along axis 1.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorParameters_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerParameters('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorParameters_Hid1']
    """

    prefix = 'MonitorParameters'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        result = OrderedDict()
        for key, array in net.buffer[self.layer_name].parameters.items():
            values = net.handler.get_numpy_copy(array)
            stats = _stats(values)
            if values.ndim >= 2:
                norms = np.sqrt(np.sum(values ** 2, axis=1))
                stats['min_L2_norm'] = float(norms.min())
                stats['avg_L2_norm'] = float(norms.mean())
                stats['max_L2_norm'] = float(norms.max())
            result[key] = stats
        return result


class MonitorLayerGradients(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of each gradient of a layer.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorGradients_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerGradients('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorGradients_Hid1']
    """

    prefix = 'MonitorGradients'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return _view_stats(net, net.buffer[self.layer_name].gradients)


class MonitorLayerInOuts(_MonitorLayer):
    """Log ``{'inputs': {...}, 'outputs': {...}}`` with ``min``/``avg``/
    ``max`` of each input and output of a layer.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorInOuts_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerInOuts('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorInOuts_Hid1']
    """

    prefix = 'MonitorInOuts'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        view = net.buffer[self.layer_name]
        return OrderedDict([('inputs', _view_stats(net, view.inputs)),
                            ('outputs', _view_stats(net, view.outputs))])


class MonitorLayerDeltas(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of a layer's internals, output deltas
    and input deltas (``{'internals': …, 'output_deltas': …,
    'input_deltas': …}``).

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorDeltas_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerDeltas('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorDeltas_Hid1']
    """

    prefix = 'MonitorDeltas'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        view = net.buffer[self.layer_name]
        return OrderedDict([
            ('internals', _view_stats(net, view.internals)),
            ('output_deltas', _view_stats(net, view.output_deltas)),
            ('input_deltas', _view_stats(net, view.input_deltas))])


# ------------------------------------------------------------ stopping ----

class EarlyStopper(Hook):
    """Stop when a log has not improved for ``patience`` entries
    (``len(log) > index_of_best + patience``).

    Args:
        log_name: dotted path of the log to watch.
        patience: number of entries without improvement allowed.
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.EarlyStopper('validation.total_loss', patience=3))
        >>> list(trainer.hooks)
        ['EarlyStopper']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'patience': Arg(Int(1), default=1),
        'criterion': Arg(Choice('min', 'max'), default='min'),
    }

    def __init__(self, log_name: str, patience: int = 1,
                 criterion: str = 'min', name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        _check_criterion('EarlyStopper', criterion)
        check_int('EarlyStopper', 'patience', patience, low=0)
        self.log_name = log_name
        self.patience = patience
        self.criterion = criterion

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        log = self._get_log(logs, self.log_name, epoch_nr)
        if not log:
            return None
        values = np.asarray(log, dtype=float)
        if np.isnan(values).all():
            best = 0
        elif self.criterion == 'min':
            best = int(np.nanargmin(values))
        else:
            best = int(np.nanargmax(values))
        if len(log) > best + self.patience:
            self.message(f"Stopping because '{self.log_name}' did not "
                         f'improve for {self.patience} checks.')
            raise StopIteration
        return None


class StopAfterEpoch(Hook):
    """Stop once ``epoch_nr >= max_epochs``.

    Args:
        max_epochs: the number of epochs to train (int >= 0).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(10))
        >>> list(trainer.hooks)
        ['StopAfterEpoch']
    """

    __arguments__ = {'max_epochs': Arg(Int(0))}

    def __init__(self, max_epochs: int, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        check_int('StopAfterEpoch', 'max_epochs', max_epochs, low=0)
        self.max_epochs = max_epochs

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if epoch_nr >= self.max_epochs:
            self.message(f'Stopping because the maximum number of epochs '
                         f'({self.max_epochs}) was reached.')
            raise StopIteration
        return None


class StopAfterThresholdReached(Hook):
    """Stop once a log reaches a threshold (``min(log) <= threshold`` for
    ``'min'``, ``max(log) >= threshold`` for ``'max'``). A log missing at
    epoch 0 is fine.

    Args:
        log_name: dotted path of the log to watch.
        threshold: the value to reach.
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterThresholdReached(
        ...     'validation.Accuracy', threshold=0.95))
        >>> list(trainer.hooks)
        ['StopAfterThresholdReached']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'threshold': Arg(Real()),
        'criterion': Arg(Choice('min', 'max'), default='min'),
    }

    def __init__(self, log_name: str, threshold: float,
                 criterion: str = 'min', name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        _check_criterion('StopAfterThresholdReached', criterion)
        check_number('StopAfterThresholdReached', 'threshold', threshold)
        self.log_name = log_name
        self.threshold = threshold
        self.criterion = criterion

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        log = self._get_log(logs, self.log_name, epoch_nr)
        if not log:
            return None
        values = np.asarray(log, dtype=float)
        if np.isnan(values).all():
            return None
        if self.criterion == 'min':
            reached = np.nanmin(values) <= self.threshold
        else:
            reached = np.nanmax(values) >= self.threshold
        if reached:
            self.message(f"Stopping because '{self.log_name}' reached the "
                         f'threshold {self.threshold}.')
            raise StopIteration
        return None


def _all_finite(value) -> bool:
    try:
        return bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):
        return True


class StopOnNan(Hook):
    """Stop when something becomes NaN or infinite.

    Checks the last entry of each log in ``logs_to_check``, the parameters,
    and the training loss: at the ``'epoch'`` timescale the last
    ``rolling_training`` total loss, at the ``'update'`` timescale the loss
    of the last batch. When it stops, it says why on stderr (also when not
    verbose) and logs the reason under its name. (The trainer itself
    raises :class:`~brainstorm.utils.NonFiniteError` first unless it was
    created with ``check_finite=False``.)

    Args:
        logs_to_check: dotted log names (or one name).
        check_parameters: check the network's parameters.
        check_training_loss: check the training loss.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopOnNan())
        >>> list(trainer.hooks)
        ['StopOnNan']
    """

    __arguments__ = {
        'logs_to_check': Arg(_NAMES, default=()),
        'check_parameters': Arg(Bool(), default=True),
        'check_training_loss': Arg(Bool(), default=True),
    }

    def __init__(self, logs_to_check=(), check_parameters: bool = True,
                 check_training_loss: bool = True, name: str | None = None,
                 timescale: str = 'epoch', interval: int = 1,
                 verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        self.logs_to_check = [logs_to_check] if isinstance(
            logs_to_check, str) else list(logs_to_check)
        self.check_parameters = check_parameters
        self.check_training_loss = check_training_loss

    def _stop(self, what: str):
        # never quiet: a run ending early for this reason must be seen
        # even with verbose=False (a WARNING goes to stderr by default)
        reason = f'Stopping because {what} is not finite.'
        _log.warning(f'{self.__name__} >> {reason}')
        raise StopIteration(reason)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        for log_name in self.logs_to_check:
            log = self._get_log(logs, log_name, epoch_nr)
            if log and not _all_finite(log[-1]):
                self._stop(f"log '{log_name}'")
        if self.check_parameters and \
                not net.handler.is_fully_finite(net.buffer.parameters):
            self._stop('a parameter')
        if self.check_training_loss:
            if self.timescale == 'update':
                if update_nr > 0 and not _all_finite(
                        net.get_loss_values()['total_loss']):
                    self._stop('the training loss')
            else:
                rolling = logs.get('rolling_training', {})
                loss = rolling.get('total_loss', rolling.get('Loss'))
                if loss and not _all_finite(loss[-1]):
                    self._stop('the training loss')
        return None


class StopOnSigQuit(Hook):
    """Stop at the next call after the process received SIGQUIT
    (Ctrl+\\ in a terminal). Where there is no SIGQUIT (Windows) or the
    trainer does not run in the main thread, the hook does nothing.

    Args:
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopOnSigQuit())
        >>> list(trainer.hooks)
        ['StopOnSigQuit']
    """

    __undescribed__ = {'quit': False}

    def __init__(self, name: str | None = None, timescale: str = 'epoch',
                 interval: int = 1, verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        self.quit = False

    def start(self, net, stepper, verbose, named_data_iters):
        """Install the SIGQUIT handler."""
        super().start(net, stepper, verbose, named_data_iters)
        self.quit = False
        if hasattr(signal, 'SIGQUIT') and \
                threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGQUIT, self._receive)
        else:
            self.message('SIGQUIT cannot be caught here; this hook is off.')

    def _receive(self, signum, frame):
        self.quit = True

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if self.quit:
            self.quit = False
            self.message('Stopping because SIGQUIT was received.')
            raise StopIteration
        return None


# ------------------------------------------------------------ progress ----

class ProgressBar(Hook):
    """A tqdm progress bar per epoch, showing the running training loss.

    It is drawn only if the output is a terminal, unless ``force`` is set.
    Needs ``training_data_iter.length``.

    Args:
        name: see :class:`Hook`.
        file: the stream to draw on (default: ``sys.stderr``).
        force: draw even if the stream is not a terminal.
        verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.ProgressBar())
        >>> list(trainer.hooks)
        ['ProgressBar']
    """

    __arguments__ = {
        'file': Arg(Optional(Writable()), default=None, init_only=True),
        'force': Arg(Bool(), default=False),
    }

    __undescribed__ = {'file': None, '_bar': None, '_bar_epoch': None,
                       '_loss_sum': 0.0, '_batches': 0, '_length': None,
                       '_enabled': False}
    __default_values__ = {'force': False}

    def __init__(self, name: str | None = None, file=None, force: bool = False,
                 verbose: bool | None = None):
        super().__init__(name, 'update', 1, verbose)
        self.file = file
        self.force = force
        self._bar = None
        self._bar_epoch = None
        self._loss_sum = 0.0
        self._batches = 0
        self._length = None
        self._enabled = False

    def start(self, net, stepper, verbose, named_data_iters):
        """Read the number of batches per epoch of the training iterator."""
        super().start(net, stepper, verbose, named_data_iters)
        iterator = named_data_iters.get('training_data_iter')
        length = getattr(iterator, 'length', None)
        if not isinstance(length, int) or length < 0:
            raise TrainingValidationError(
                f"ProgressBar '{self.__name__}': the training iterator needs "
                f'an int length (batches per epoch). Received: {length!r}')
        self._length = length
        stream = self.file if self.file is not None else sys.stderr
        is_terminal = bool(getattr(stream, 'isatty', lambda: False)())
        self._enabled = self.is_root and (
            bool(self.force) or (is_terminal and bool(self.run_verbosity)))
        if self._enabled:
            # import now, before any hook of this run writes a file: a
            # module file written later into a folder on sys.path can then
            # never be picked up in its place
            from tqdm import tqdm  # noqa: F401
        self._close()

    def _close(self):
        if self._bar is not None:
            self._bar.close()
        self._bar = None
        self._bar_epoch = None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self._enabled or update_nr == 0:
            return None
        from tqdm import tqdm
        if self._bar is None or self._bar_epoch != epoch_nr:
            self._close()
            self._bar = tqdm(total=self._length, desc=f'Epoch {epoch_nr}',
                             file=self.file if self.file is not None
                             else sys.stderr, leave=True)
            self._bar_epoch = epoch_nr
            self._loss_sum, self._batches = 0.0, 0
        self._loss_sum += float(net.get_loss_values()['total_loss'])
        self._batches += 1
        self._bar.set_postfix(loss=f'{self._loss_sum / self._batches:.4g}',
                              refresh=False)
        self._bar.update(1)
        if self._bar.n >= self._length:
            self._close()
        return None


# ------------------------------------------------- stepper attributes -----

def _hyperparameters(stepper) -> list:
    """The declared hyperparameters of a stepper: the arguments of its
    class's ``__init__`` that it keeps as attributes of the same name."""
    try:
        names = list(inspect.signature(type(stepper).__init__).parameters)
    except (TypeError, ValueError):
        return []
    return [name for name in names[1:]
            if not name.startswith('_') and name != 'steppers'
            and name in vars(stepper)]


def _resolve_attribute(owner: str, stepper, attr_name: str):
    """(stepper, hyperparameter) for a dotted ``attr_name``.

    The path reaches only declared stepper hyperparameters: a
    :class:`~brainstorm.training.data_parallel.DataParallel` wrapper is
    looked through (``stepper.`` may be named), a MultiStepper's steppers
    are reached by pattern (``'steppers.Conv*.learning_rate'``), and the
    last part must be an argument of the stepper's ``__init__``. Nothing
    else (no private or dunder names, no other objects) can be reached.
    """
    from brainstorm.training.data_parallel import DataParallel
    from brainstorm.training.steppers import MultiStepper
    if not isinstance(attr_name, str) or not attr_name:
        raise TrainingValidationError(
            f'{owner}: attr_name must be a non-empty str. Received: '
            f'{attr_name!r}')
    *path, attr = attr_name.split('.')
    target = stepper
    i = 0
    while i < len(path):
        part = path[i]
        if isinstance(target, DataParallel):
            # attribute access falls through a DataParallel wrapper
            target = target.stepper
            i += part == 'stepper'
        elif isinstance(target, MultiStepper) and part == 'steppers' and \
                i + 1 < len(path):
            key = path[i + 1]
            if key not in target.steppers:
                raise UnknownNameError(
                    f"{owner}: the stepper {stepper!r} has no "
                    f"'{attr_name}' ('{key}' not found among the patterns "
                    f'{list(target.steppers)}).')
            target = target.steppers[key]
            i += 2
        else:
            raise UnknownNameError(
                f"{owner}: the stepper {stepper!r} has no '{attr_name}' "
                f"('{part}' not found; paths reach only 'steppers.<pattern>' "
                'of a MultiStepper).')
    if isinstance(target, DataParallel):
        target = target.stepper
    declared = _hyperparameters(target)
    if attr not in declared:
        raise UnknownNameError(
            f"{owner}: the stepper {stepper!r} has no attribute "
            f"'{attr_name}': the last part must be a hyperparameter of "
            f'{type(target).__name__}: {declared}.')
    return target, attr


class ModifyStepperAttribute(Hook):
    """Set a stepper attribute from a schedule every time it is called
    (also at count 0).

    Args:
        schedule: a schedule (see :mod:`brainstorm.training.schedules`) or
            any callable with the same arguments.
        attr_name: the attribute; dotted paths reach into a MultiStepper,
            e.g. ``'steppers.Conv*.learning_rate'``.
        timescale, interval, name, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.ModifyStepperAttribute(
        ...     bs.training.schedules.Exponential(0.1, factor=0.9)))
        >>> list(trainer.hooks)
        ['ModifyStepperAttribute']
    """

    __arguments__ = {
        'schedule': Arg(AnyOf(Instance(Schedule, example=lambda: Linear(1, 0, 2)),
                              Callable())),
        'attr_name': Arg(Str(nonempty=True), default='learning_rate'),
    }

    def __init__(self, schedule, attr_name: str = 'learning_rate',
                 timescale: str = 'epoch', interval: int = 1,
                 name: str | None = None, verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        if not callable(schedule):
            raise TrainingValidationError(
                'ModifyStepperAttribute: schedule must be callable. '
                f'Received: {schedule!r}')
        self.schedule = schedule
        self.attr_name = attr_name

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that the stepper has the attribute."""
        super().start(net, stepper, verbose, named_data_iters)
        _resolve_attribute(f"ModifyStepperAttribute '{self.__name__}'",
                           stepper, self.attr_name)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        target, attr = _resolve_attribute(
            f"ModifyStepperAttribute '{self.__name__}'", stepper,
            self.attr_name)
        value = self.schedule(epoch_nr, update_nr, self.timescale,
                              self.interval, net, stepper, logs)
        setattr(target, attr, value)
        return None


class ReduceOnPlateau(Hook):
    """Multiply a stepper attribute by ``factor`` when a log stops
    improving.

    Each new log entry that is not strictly better than the best so far
    counts as a bad check; after more than ``patience`` bad checks in a row
    the attribute becomes ``max(value * factor, minimum)`` and the count
    starts again.

    Args:
        log_name: dotted path of the log to watch.
        attr_name: the stepper attribute (dotted paths as in
            :class:`ModifyStepperAttribute`).
        factor: multiplier in (0, 1).
        patience: bad checks tolerated (int >= 0).
        minimum: the attribute never goes below this (>= 0).
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.ReduceOnPlateau('validation.total_loss'))
        >>> list(trainer.hooks)
        ['ReduceOnPlateau']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'attr_name': Arg(Str(nonempty=True), default='learning_rate'),
        'factor': Arg(Real(0, 1, include_low=False, include_high=False),
                      default=0.1),
        'patience': Arg(Int(0), default=5),
        'minimum': Arg(Real(0), default=0.0),
        'criterion': Arg(Choice('min', 'max'), default='min'),
    }

    __undescribed__ = {'_best': None, '_bad_checks': 0, '_seen': 0}

    def __init__(self, log_name: str, attr_name: str = 'learning_rate',
                 factor: float = 0.1, patience: int = 5,
                 minimum: float = 0.0, criterion: str = 'min',
                 name: str | None = None, timescale: str = 'epoch',
                 interval: int = 1, verbose: bool | None = None):
        super().__init__(name, timescale, interval, verbose)
        owner = 'ReduceOnPlateau'
        check_number(owner, 'factor', factor, 0, 1, include_low=False,
                     include_high=False)
        check_int(owner, 'patience', patience, low=0)
        check_number(owner, 'minimum', minimum, low=0)
        _check_criterion(owner, criterion)
        self.log_name = log_name
        self.attr_name = attr_name
        self.factor = factor
        self.patience = patience
        self.minimum = minimum
        self.criterion = criterion
        self._best: float | None = None
        self._bad_checks = 0
        self._seen = 0

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that the stepper has the attribute."""
        super().start(net, stepper, verbose, named_data_iters)
        _resolve_attribute(f"ReduceOnPlateau '{self.__name__}'", stepper,
                           self.attr_name)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        log = self._get_log(logs, self.log_name, epoch_nr)
        if not log:
            return None
        for value in log[self._seen:]:
            if self._best is None or _is_better(value, self._best,
                                                self.criterion):
                self._best = value
                self._bad_checks = 0
            else:
                self._bad_checks += 1
        self._seen = len(log)
        if self._bad_checks > self.patience:
            self._bad_checks = 0
            target, attr = _resolve_attribute(
                f"ReduceOnPlateau '{self.__name__}'", stepper, self.attr_name)
            old = getattr(target, attr)
            new = max(old * self.factor, self.minimum)
            if new < old:
                setattr(target, attr, new)
                self.message(f'{self.attr_name} reduced from {old:.6g} to '
                             f'{new:.6g}.')
        return None

    def get_state(self) -> dict:
        state = {'bad_checks': np.int64(self._bad_checks),
                 'seen': np.int64(self._seen)}
        if self._best is not None:
            state['best'] = np.float64(self._best)
        return state

    def set_state(self, state: dict) -> None:
        self._bad_checks = int(np.asarray(state['bad_checks']))
        self._seen = int(np.asarray(state['seen']))
        self._best = float(np.asarray(state['best'])) if 'best' in state \
            else None
