"""Hooks that show training: a progress bar, PNG plots and bokeh pages.

Only rank 0 of a data-parallel run draws. matplotlib (``SavePlot``) and
bokeh (``BokehVisualizer``) are optional and imported when used.
"""

from __future__ import annotations

import copy
import pickle
import sys
from collections import OrderedDict

import numpy as np

import brainstorm.optional as optional
from brainstorm.__about__ import install_hint
from brainstorm.arguments import Arg, Bool, FileName, Optional, Writable
from brainstorm.errors import TrainingValidationError
from brainstorm.files import (
    write_atomically,
)
from brainstorm.hooks.base import _SOME_NAMES, Hook, _names_list
from brainstorm.scorers import batch_size_of
from brainstorm.training.utils import log_counters

__all__ = ['ProgressBar', 'SavePlot', 'BokehVisualizer']


def _quantity(log_name: str) -> str:
    """The kind of quantity a log holds, for grouping plots.

    Every loss shares one panel, each other score (``Accuracy``...) has its
    own.
    """
    leaf = log_name.rsplit('.', 1)[-1]
    return 'loss' if 'loss' in leaf.lower() else leaf


class SavePlot(Hook):
    """Save a PNG plot of some logs.

    Needs matplotlib: ``pip install 'brainstorm-nn[plot]'``. Each entry is
    drawn at the epoch (or, for ``timescale='update'``, the update) it was
    logged at. Logs of one kind of quantity share a panel (all losses; each
    score such as ``Accuracy`` on its own), with labelled axes and a
    legend.

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
        'filename': Arg(FileName()),
        'log_names': Arg(_SOME_NAMES),
    }

    def __init__(
        self,
        filename: str,
        log_names,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
    ):
        super().__init__(name, timescale, interval)
        self.filename = filename
        self.log_names = _names_list(log_names)

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that matplotlib can be imported.

        Raises:
            ImportError: with the command that installs it.
        """
        super().start(net, stepper, verbose, named_data_iters)
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ImportError(
                f"SavePlot '{self.__name__}' needs matplotlib. Install it "
                f'with: {install_hint("plot")}'
            ) from None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Draw the logs and rewrite the PNG file (on rank 0 only)."""
        if not self.is_root:
            return None
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
        from matplotlib.ticker import MaxNLocator

        panels = OrderedDict()  # quantity -> [(log name, x, y)]
        for log_name in self.log_names:
            log = self._get_number_log(logs, log_name, epoch_nr)
            if not log:
                continue
            epochs, updates = log_counters(log)
            x = epochs if self.timescale == 'epoch' or None in updates else updates
            panels.setdefault(_quantity(log_name), []).append(
                (log_name, np.asarray(x, dtype=float), np.asarray(log, dtype=float))
            )
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
    """Write the monitored logs as an interactive standalone HTML page.

    Needs bokeh: ``pip install "brainstorm-nn[bokeh]"``. The page embeds
    bokeh's JavaScript, so it opens offline. Each entry is drawn at the
    epoch (or update) it was logged at; logs of one kind of quantity share
    a panel (as in :class:`SavePlot`).

    Args:
        log_names: dotted names of the logs to draw (one line each).
        filename: the HTML file (rewritten each time).
        timescale, interval, name, verbose: see :class:`Hook`.
    """

    __arguments__ = {
        'log_names': Arg(_SOME_NAMES),
        'filename': Arg(FileName()),
    }

    def __init__(
        self,
        log_names,
        filename: str = 'bokeh_visualizer.html',
        timescale: str = 'epoch',
        interval: int = 1,
        name: str | None = None,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.log_names = _names_list(log_names)
        self.filename = filename

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that bokeh is installed.

        Raises:
            ImportError: with the command that installs it.
        """
        super().start(net, stepper, verbose, named_data_iters)
        _import_bokeh()

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Draw the logs and rewrite the HTML page (on rank 0 only)."""
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
            log = self._get_number_log(logs, log_name, epoch_nr)
            if not log:
                continue
            epochs, updates = log_counters(log)
            x = epochs if self.timescale == 'epoch' or None in updates else updates
            panels.setdefault(_quantity(log_name), []).append(
                (log_name, [float(v) for v in x], [float(v) for v in log])
            )
        plots = []
        for quantity, lines in panels.items():
            plot = figure(
                title=quantity,
                x_axis_label=self.timescale,
                y_axis_label=quantity,
                height=300,
                sizing_mode='stretch_width',
                tools='pan,wheel_zoom,box_zoom,reset,save,hover',
            )
            for i, (log_name, x, y) in enumerate(lines):
                color = Category10_10[i % 10]
                plot.line(x, y, legend_label=log_name, color=color, line_width=2)
                plot.scatter(x, y, legend_label=log_name, color=color)
            plot.legend.click_policy = 'hide'
            plots.append(plot)
        html = file_html(
            column(*plots, sizing_mode='stretch_width'),
            INLINE,
            title=f'brainstorm: {self.__name__}',
        )

        def write(tmp):
            with open(tmp, 'w', encoding='utf-8') as f:
                f.write(html)

        write_atomically(self.filename, write)
        return None


def _import_bokeh():
    """Fail with an install hint if bokeh is missing or does not import."""
    if not optional.has_bokeh:
        raise ImportError(
            'BokehVisualizer needs bokeh. Install it with: '
            f'{optional.install_hint("bokeh")}'
        )
    optional.import_optional('bokeh', 'BokehVisualizer')


_BAR_CLASS: list = []


def _bar_class():
    """The tqdm class without its monitor thread (it would outlive training)."""
    if not _BAR_CLASS:
        from tqdm import tqdm

        class _Bar(tqdm):
            monitor_interval = 0

        _BAR_CLASS.append(_Bar)
    return _BAR_CLASS[0]


#: the standard streams a pickled ProgressBar keeps by name: the process
#: that loads it draws on its own
_STANDARD_STREAMS = {'stdout': lambda: sys.stdout, 'stderr': lambda: sys.stderr}


class _StandardStream:
    """``sys.stdout`` or ``sys.stderr`` (by ``name``) in a pickled ProgressBar."""

    def __init__(self, name: str):
        self.name = name


class ProgressBar(Hook):
    """A tqdm progress bar per epoch, showing the running training loss.

    It is drawn only if the output is a terminal, unless ``force`` is set.
    Needs ``training_data_iter.length``. The loss shown is the mean of the
    batches' losses so far, batches without samples left out; under
    data-parallel training the bar runs on rank 0 and shows the losses of
    its parts of the batches (the epoch's log, ``rolling_training``, holds
    the loss over all ranks).

    The hook (and a trainer holding it) can be copied and pickled outside
    ``train``. A copy (``copy.copy``, ``copy.deepcopy``) draws on the
    same stream. A pickle keeps ``sys.stdout`` and ``sys.stderr`` as such
    (the unpickled hook draws on those of the process that loads it) and
    a stream that can be pickled itself (an ``io.StringIO``); any other
    stream (an open file, a socket) is left out, and the unpickled hook
    draws on the default, ``sys.stderr``.

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
        'file': Arg(Optional(Writable()), init_only=True),
        'force': Arg(Bool(), omit_default=True),
    }

    __undescribed__ = {
        'file': None,
        '_bar': None,
        '_bar_epoch': None,
        '_loss_sum': 0.0,
        '_batches': 0,
        '_length': None,
        '_enabled': False,
    }
    #: Brainstorm 0.5's epoch length and bar object (set in start)
    __dropped_05__ = {'length', 'bar'}

    def __init__(
        self,
        name: str | None = None,
        file=None,
        force: bool = False,
        verbose: bool | None = None,
    ):
        super().__init__(name, 'update', 1, verbose)
        self.file = file
        self.force = force
        self._bar = None
        self._bar_epoch = None
        self._loss_sum = 0.0
        self._batches = 0
        self._length = None
        self._enabled = False

    def __getstate__(self) -> dict:
        """The state for pickle: the stream as described in the class doc.

        The bar of an epoch in progress is left out (a copy opens its own).
        """
        state = self.__dict__.copy()
        state['_bar'] = state['_bar_epoch'] = None
        file = state.get('file')
        for name, stream in _STANDARD_STREAMS.items():
            if file is stream() or file is getattr(sys, f'__{name}__'):
                state['file'] = _StandardStream(name)
                return state
        if file is not None:
            try:
                pickle.dumps(file)
            except (TypeError, AttributeError, ValueError, pickle.PicklingError):
                state['file'] = None  # not picklable: the default stream
        return state

    def __setstate__(self, state: dict) -> None:
        """Restore a pickled hook (``sys.stdout``/``sys.stderr`` of this process)."""
        state = dict(state)
        file = state.get('file')
        if isinstance(file, _StandardStream):
            state['file'] = _STANDARD_STREAMS[file.name]()
        self.__dict__.update(state)

    def __copy__(self):
        """A shallow copy drawing on the same stream (without an open bar)."""
        copied = type(self).__new__(type(self))
        copied.__dict__.update(self.__dict__)
        copied._bar = copied._bar_epoch = None
        return copied

    def __deepcopy__(self, memo: dict):
        """A deep copy drawing on the same stream (without an open bar).

        The stream is shared, not copied: both hooks draw on it.
        """
        copied = type(self).__new__(type(self))
        memo[id(self)] = copied
        state = {
            key: value
            for key, value in self.__dict__.items()
            if key not in ('file', '_bar', '_bar_epoch')
        }
        copied.__dict__.update(copy.deepcopy(state, memo))
        copied.file = self.file
        copied._bar = copied._bar_epoch = None
        return copied

    def start(self, net, stepper, verbose, named_data_iters):
        """Read the number of batches per epoch of the training iterator.

        Without one (:meth:`Trainer.evaluate
        <brainstorm.training.trainer.Trainer.evaluate>` runs no training
        epoch) the bar draws nothing.
        """
        super().start(net, stepper, verbose, named_data_iters)
        self._close()
        if 'training_data_iter' not in named_data_iters:
            self._length, self._enabled = None, False
            return
        iterator = named_data_iters.get('training_data_iter')
        length = getattr(iterator, 'length', None)
        if not isinstance(length, int) or length < 0:
            raise TrainingValidationError(
                f"ProgressBar '{self.__name__}': the training iterator needs "
                f'an int length (batches per epoch). Received: {length!r}'
            )
        self._length = length
        stream = self.file if self.file is not None else sys.stderr
        is_terminal = bool(getattr(stream, 'isatty', lambda: False)())
        self._enabled = self.is_root and (
            bool(self.force) or (is_terminal and bool(self.run_verbosity))
        )
        if self._enabled:
            # import now, before any hook of this run writes a file: a
            # module file written later into a folder on sys.path can then
            # never be picked up in its place
            from tqdm import tqdm  # noqa: F401
        self._close()

    def end(self):
        """Close the bar left open by a run that ended within an epoch."""
        self._close()

    def _close(self):
        """Close the bar of the current epoch, if one is open."""
        if self._bar is not None:
            self._bar.close()
        self._bar = None
        self._bar_epoch = None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Advance the bar by one batch (a new bar at each epoch)."""
        if not self._enabled or update_nr == 0:
            return None
        if self._bar is None or self._bar_epoch != epoch_nr:
            self._close()
            self._bar = _bar_class()(
                total=self._length,
                desc=f'Epoch {epoch_nr}',
                file=self.file if self.file is not None else sys.stderr,
                leave=True,
            )
            self._bar_epoch = epoch_nr
            self._loss_sum, self._batches = 0.0, 0
        if batch_size_of(net):  # a loss over no sample is no figure
            self._loss_sum += float(net.get_loss_values()['total_loss'])
            self._batches += 1
        if self._batches:
            self._bar.set_postfix(
                loss=f'{self._loss_sum / self._batches:.4g}', refresh=False
            )
        self._bar.update(1)
        if self._bar.n >= self._length:
            self._close()
        return None


# ---- Brainstorm 0.5's text progress bar -------------------------------------
# Kept for code written for 0.5 (also in brainstorm.hooks and
# brainstorm.utils); the ProgressBar hook above draws with tqdm.


def silence():
    """An endless iterator of empty strings.

    Yields:
        ``''``, forever.
    """
    while True:
        yield ''


def progress_bar(
    maximum: int,
    prefix: str = '[',
    bar: str = '====1====2====3====4====5====6====7====8====9====0',
    suffix: str = '] Took: {0}\n',
):
    """A generator drawing a plain-text progress bar.

    Send it the current progress (0..maximum); it yields the characters to
    print. Kept for compatibility; :class:`brainstorm.hooks.ProgressBar` uses
    tqdm.
    """
    import time

    start = time.time()
    i = 0
    progress = yield prefix
    while progress < maximum:
        new_i = int(len(bar) * progress / maximum) if maximum else len(bar)
        progress = yield bar[i:new_i]
        i = new_i
    elapsed = time.time() - start
    yield bar[i:] + suffix.format(f'{elapsed:0.1f}s')
