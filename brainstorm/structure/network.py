"""The Network: layers, their memory, and everything to run and inspect them."""

from __future__ import annotations

import json  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import threading
import warnings
from collections import OrderedDict

import numpy as np

import brainstorm.handlers as handlers
from brainstorm.arguments import (
    SEED,
    Arg,
    Bool,
    FileName,
    Instance,
    Optional,
    Str,
    check_value,
    declare,
)
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import (
    InitializationError,
    NetworkValidationError,
)
from brainstorm.files import (
    get_brainstorm_info,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    h5py_on_first_use,
)
from brainstorm.handlers import default_handler  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.handlers.base_handler import Handler
from brainstorm.initializers import (
    ArrayInitializer,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    evaluate_initializer,
)
from brainstorm.randomness import Seedable
from brainstorm.registry import is_registered
from brainstorm.shapes import reshape_view
from brainstorm.structure import external_data, network_io, prediction
from brainstorm.structure.architecture import (
    generate_architecture,
    instantiate_layers_from_architecture,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.buffers import BufferManager
from brainstorm.structure.clearing import overwritten_memory
from brainstorm.structure.layout import RESERVED_LAYER_NAMES as RESERVED_LAYER_NAMES
from brainstorm.structure.layout import create_layout, plan_network
from brainstorm.structure.view_references import (
    choose_initializer,
    install_modifiers,
    merge_refs,
    resolve_patterns,
)
from brainstorm.value_modifiers import GradientModifier

# ``h5py``, in Brainstorm 0.5's namespace of this module, is imported when
# first asked for, so that importing brainstorm does not load HDF5
__getattr__ = h5py_on_first_use(__name__)

__all__ = ['BufferPathError', 'Network']

# Still importable from here since network files and external data moved
# to modules of their own (RESERVED_LAYER_NAMES is imported above).
MissingInputError = external_data.MissingInputError
NETWORK_FILE_FORMAT = network_io.NETWORK_FILE_FORMAT
check_stored_sizes = network_io.check_stored_sizes


def _short_repr(value) -> str:
    """``repr(value)``, cut to 60 characters (initializers in messages)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'


class BufferPathError(NetworkValidationError, KeyError):
    """A path for :meth:`Network.get` (or name for ``get_input``) that is no str.

    A KeyError too: ``get`` promises one for a bad path (and raises a plain
    KeyError for an unknown one).
    """

    def __str__(self):
        return str(self.args[0])


_FLAG = Arg(Bool())
_PATH = Arg(Str())


def _flag(method: str, name: str, value) -> bool:
    """``value`` if it is a bool (a NumPy bool as a bool), else an error.

    The check of ``@declare(NetworkValidationError, name=Arg(Bool()))``
    with its message, without its cost (``signature.bind``, some
    microseconds) on the passes, which run once per batch.

    Raises:
        NetworkValidationError: naming the method and the argument, for a
            value that is not a bool (``'False'`` is truthy, and an array's
            truth is ambiguous).
    """
    if value is True or value is False:
        return value
    return check_value(
        f'Network.{method}', None, name, _FLAG, value, error=NetworkValidationError
    )


def _training_flag(value) -> bool:
    """``training_pass`` as a bool: also None, 0 and 1, as Brainstorm 0.5 took.

    0.5 typed it ``Optional[bool]`` and read it by truth; None, 0 and 1
    (ints, not floats or NumPy ints) keep that meaning. Anything else that
    is no bool is refused by :func:`_flag` (``'False'`` is truthy).
    """
    if value is True or value is False:
        return value
    if value is None or (type(value) is int and value in (0, 1)):
        return bool(value)
    return _flag('forward_pass', 'training_pass', value)


def _path(method: str, name: str, value) -> str:
    """``value`` if it is a str, else a :class:`BufferPathError` naming it."""
    if isinstance(value, str):
        return value
    return check_value(
        f'Network.{method}', None, name, _PATH, value, error=BufferPathError
    )


class Network(Seedable):
    """A network of layers over three flat buffers.

    Usually created with :meth:`from_layer`, :meth:`from_architecture` or
    :meth:`from_hdf5`.

    Args:
        layers: OrderedDict of name -> layer implementation, canonical order.
        buffer_manager: the :class:`BufferManager` holding their memory.
        architecture: the architecture dict the layers were made from.
        seed: seed for the network's random state ``rnd``.
        handler: the handler to compute with.

    Attributes:
        layers: the layers in canonical (topological) order.
        loss_layers: names of the ``Loss`` layers.
        output_name: default buffer path scorers read predictions from.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        >>> net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
        >>> net.initialize(bs.initializers.Gaussian(0.1))
        >>> list(net.layers)
        ['Input', 'FullyConnected', 'Output_projection', 'Output', 'Loss']
        >>> net.provide_external_data({'default': np.ones((1, 2, 4)),
        ...                            'targets': np.zeros((1, 2, 1))})
        >>> net.forward_pass()
        >>> net.get('Output.outputs.predictions').shape  # (T, B, classes)
        (1, 2, 3)
    """

    def __init__(self, layers, buffer_manager, architecture, seed=None, handler=None):
        super().__init__(seed)
        self.layers = layers
        self.buffer_manager = buffer_manager
        self.architecture = architecture
        self.loss_layers = [name for name, layer in layers.items() if layer.is_loss]
        self.initializers = {}
        self.weight_modifiers = OrderedDict()
        self.gradient_modifiers = OrderedDict()
        self._weight_modifier_refs = {}
        self._gradient_modifier_refs = {}
        self.output_name = None
        # set by initialize, loading and the first run that finds a
        # parameter other than zero (see prediction.check_parameters_set)
        self._parameters_set = False
        # set_handler moved the memory since the last forward pass: the
        # batch and the activations are gone (see backward_pass)
        self._memory_moved = False
        # layer name -> its inputs fed only by the Input layer (the data)
        self._data_fed_inputs = {
            name: frozenset(
                in_name
                for in_name in layer.in_shapes
                if {c.start_layer for c in layer.incoming if c.input_name == in_name}
                == {'Input'}
            )
            for name, layer in layers.items()
        }
        self.handler = None
        self._init_thread_guard()
        self.set_handler(handler or handlers.default_handler)

    def __getstate__(self) -> dict:
        """The state for ``copy.deepcopy`` and pickle.

        The BufferManager carves the copy's views anew (see its
        ``__getstate__``); the trainable mask is a cache, made again when
        first needed.

        Raises:
            NetworkValidationError: if another thread is running the
                network (see :meth:`_enter`).
        """
        self._enter('copy.deepcopy or pickle')
        try:
            state = dict(self.__dict__)
        finally:
            self._leave()
        state['_trainable_mask'] = None
        for name in ('_guard', '_guard_depth', '_guard_holder'):
            del state[name]
        return state

    def __copy__(self) -> Network:
        """``copy.copy``: another name for this network.

        It shares all of the original's state (its attribute dict): the
        layers, the memory, the handler, the thread guard. What one name
        does the other sees: ``set_handler`` through either moves both, and
        a thread using the copy while another uses the original is refused
        as on the network itself (see :meth:`_enter`).
        """
        copied = type(self).__new__(type(self))
        copied.__dict__ = self.__dict__
        return copied

    def __setstate__(self, state: dict) -> None:
        """Restore a copy; it gets a thread guard of its own."""
        self.__dict__.update(state)
        # copies from before the flag existed: their parameters are
        # looked at once, when they first run
        self.__dict__.setdefault('_parameters_set', False)
        self.__dict__.setdefault('_memory_moved', False)
        self._init_thread_guard()
        # what the layers overwrite and their types follow their classes,
        # which may have changed since the network was pickled
        self._derive_from_layer_classes()

    # ------------------------------------------------------- threads ------

    def _init_thread_guard(self) -> None:
        self._guard = threading.RLock()
        self._guard_depth = 0
        self._guard_holder: tuple | None = None

    def _enter(self, what: str) -> None:
        """Hold the network for the calling thread while it runs ``what``.

        A network holds one batch and one set of activations, so it runs
        in one thread at a time. The thread holding it may enter again
        (a hook of ``Trainer.train`` runs passes of its own); every
        :meth:`_enter` is matched by a :meth:`_leave`. This is a
        non-blocking lock: no allocation, nothing waits.

        Raises:
            NetworkValidationError: if another thread holds the network,
                naming both threads and what each one does.
        """
        if not self._guard.acquire(blocking=False):
            holder = self._guard_holder
            other = (
                'another thread'
                if holder is None
                else f'thread {holder[0]!r} (in {holder[1]})'
            )
            raise NetworkValidationError(
                f'{self!r}: {what} was called in thread '
                f'{threading.current_thread().name!r} while {other} is '
                'using this network. A network runs in one thread at a '
                'time (it holds one batch and its activations): give each '
                'thread its own copy (copy.deepcopy(net)), or hold a lock '
                'of your own around each whole use (provide_external_data, '
                'the passes, reading the results).'
            )
        self._guard_depth += 1
        if self._guard_depth == 1:
            self._guard_holder = (threading.current_thread().name, what)

    def _leave(self) -> None:
        """Release what the matching :meth:`_enter` held."""
        self._guard_depth -= 1
        if not self._guard_depth:
            self._guard_holder = None
        self._guard.release()

    # ------------------------------------------------------ construction ---

    @classmethod
    def from_layer(cls, some_layer) -> Network:
        """Build the network of all layers connected to ``some_layer``."""
        return cls.from_architecture(generate_architecture(some_layer))

    @classmethod
    def from_architecture(cls, architecture: dict) -> Network:
        """Build a network from an architecture dict.

        Raises:
            NetworkValidationError, LayerValidationError: for malformed
                architectures or layer arguments.
        """
        handler = handlers.default_handler
        architecture, layers, layout = plan_network(architecture, handler)
        return cls(layers, BufferManager(layout, handler), architecture)

    # --------------------------------------------------------- inspection ---

    @property
    def buffer(self):
        """The root BufferView (``parameters``, ``gradients``, one view per layer)."""
        return self.buffer_manager.views

    @property
    def layout(self) -> dict:
        """The memory layout dict (see :mod:`brainstorm.structure.layout`)."""
        return self.buffer_manager.layout

    def get(self, buffer_path: str) -> np.ndarray:
        """A NumPy copy of the buffer at a dotted path.

        Example: ``net.get('Hid1.outputs.default')``, ``net.get('parameters')``.

        Raises:
            KeyError: if the path is unknown or names a view, not an array.
            BufferPathError: (a NetworkValidationError and KeyError) if
                ``buffer_path`` is not a str.
        """
        node = self.buffer[_path('get', 'buffer_path', buffer_path)]
        if isinstance(node, BufferView):
            raise KeyError(
                f"'{buffer_path}' is a view, not a buffer. Its entries: {node.keys()}"
            )
        return self.handler.get_numpy_copy(node)

    def get_input(self, input_name: str) -> np.ndarray:
        """A NumPy copy of the data last provided for ``input_name``.

        Raises:
            KeyError: if the Input layer has no such output.
            BufferPathError: (a NetworkValidationError and KeyError) if
                ``input_name`` is not a str.
        """
        return self.get('Input.outputs.' + _path('get_input', 'input_name', input_name))

    # --------------------------------------------------------- handlers ----

    @declare(NetworkValidationError, new_handler=Arg(Instance(Handler)))
    def set_handler(self, new_handler) -> None:
        """Move all memory to ``new_handler`` and compute with it.

        Parameters (and the rest of the constant buffer) are kept; the
        batch given by :meth:`provide_external_data` and the outputs,
        internals and deltas of the last passes are not: provide the batch
        and run :meth:`forward_pass` again (a :meth:`backward_pass` before
        that raises a NetworkValidationError). If the new handler asks for
        other layer workspaces than the old one (e.g. convolution columns,
        see ``Layer.workspace_shapes``), the memory layout is made anew
        for it.

        Raises:
            NetworkValidationError: if a parameter has a value beyond the
                range of the new handler's dtype (a float64 70000 on
                float16), naming it, its index and value and the dtype; the
                network stays as it was, on its old handler (see
                ``BufferManager.check_handler``; to an equal or wider dtype
                this costs one dtype comparison).
            LayerValidationError: if a layer cannot compute on the new
                handler (an ``epsilon`` its dtype rounds to 0, see
                ``Layer.check_handler``); the network stays as it was.
        """
        self._enter('set_handler')
        try:
            if self.handler is not new_handler:
                # before anything changes: a refusal leaves the network as it was
                self.buffer_manager.check_handler(new_handler)
                for layer in self.layers.values():
                    layer.check_handler(new_handler)
                if self.handler is not None:  # not when the network is built
                    self._memory_moved = True
                changed = [
                    layer.use_workspaces_of(new_handler)
                    for layer in self.layers.values()
                ]
                if any(changed):
                    self._relayout(new_handler)
                elif self.buffer_manager.handler is not new_handler:
                    self.buffer_manager.set_handler(new_handler)
                self.handler = new_handler
            for layer in self.layers.values():
                layer.set_handler(new_handler)
            self._derive_from_layer_classes()
            self._trainable_mask = None
        finally:
            self._leave()

    def _derive_from_layer_classes(self) -> None:
        """What follows from the layers' classes and the layout.

        The BufferManager learns what the layers overwrite (see
        ``clearing``); ``_type_names`` are the types of the layers and of the
        registered layer classes they derive from, for
        ``Handler.network_pass``: a subclass of ``LstmLayerImpl`` with a type
        of its own brings ``'Lstm'`` too, so a handler preparing for Lstm
        layers prepares for it; ``_id_inputs`` are the data names that
        layers read as ids (``Layer.id_inputs``), each with those layers.
        """
        overwritten = overwritten_memory(self.layers, self.layout)
        self.buffer_manager.skip_clearing(overwritten.constant, overwritten.sized)
        self._overwritten_inputs = overwritten.inputs
        self._type_names = frozenset(
            cls.get_type_name()  # type: ignore[attr-defined]
            for layer in self.layers.values()
            for cls in type(layer).__mro__
            if is_registered(cls)
        )
        readers: dict = {}
        for layer in self.layers.values():
            for c in layer.incoming:
                if c.start_layer == 'Input' and c.input_name in layer.id_inputs:
                    readers.setdefault(c.output_name, []).append(layer._desc())
        self._id_inputs = {name: tuple(found) for name, found in readers.items()}

    def _relayout(self, new_handler) -> None:
        """Lay the memory out anew on ``new_handler``.

        The layout follows the layers' current internals; the constant
        buffer is kept (or, if its size changed, the parameters).
        """
        old = self.buffer_manager
        manager = BufferManager(create_layout(self.layers), new_handler)
        # set_handler checked the parameters: only scratch can overflow
        with np.errstate(over='ignore'):
            if manager.sizes[0] == old.sizes[0]:
                new_handler.set_from_numpy(
                    manager.buffers[0], old.handler.get_numpy_copy(old.buffers[0])
                )
            else:
                new_handler.set_from_numpy(
                    manager.views.parameters,
                    old.handler.get_numpy_copy(old.views.parameters),
                )
        if old.time_size is not None:
            manager.resize(old.time_size, old.batch_size)
        self.buffer_manager = manager

    # -------------------------------------------------------- running ------

    def provide_external_data(
        self, data: dict, all_inputs: bool = True, check_finite: bool = True
    ):
        """Put a batch of data into the Input layer's outputs.

        Args:
            data: input name -> array of shape ``(T, B, *features)`` (or
                ``(B, *features)`` for batch-sized inputs).
            all_inputs: if False, inputs missing from ``data`` are skipped:
                they keep their values, or are zeros if the batch changed
                ``(T, B)``.
            check_finite: refuse NaN, inf and values beyond the range of
                the handler's dtype (e.g. float64 data beyond float32's);
                one ``max`` and one ``min`` per array. False skips it (as
                ``check_finite=False`` of the data iterators and the
                trainer).

        Raises:
            NetworkValidationError: for missing names, wrong shapes or ranks,
                inconsistent T/B, non-numeric data, or (with
                ``check_finite``) a value that is not finite in the
                handler's dtype, naming the input, its index and value;
                for an ``all_inputs`` or ``check_finite`` that is not a bool
                (NumPy bools are).
        """
        all_inputs = _flag('provide_external_data', 'all_inputs', all_inputs)
        self._enter('provide_external_data')
        try:
            external_data.provide_external_data(
                self.layers['Input'],
                self.buffer_manager,
                data,
                all_inputs,
                check_finite,
                self._id_inputs,
            )
        finally:
            self._leave()

    def forward_pass(self, training_pass: bool = False, context=None) -> None:
        """Run all layers forward.

        Args:
            training_pass: whether this pass is for training (dropout etc.).
            context: a context from :meth:`get_context` to continue from;
                the context slots are zeroed if None.

        Raises:
            UninitializedNetworkError: (a NetworkValidationError) if the
                parameters were never initialised, loaded or set: all
                of them are zero and neither :meth:`initialize` nor
                loading set them (see
                :func:`~brainstorm.structure.prediction.check_parameters_set`).
            NetworkValidationError: if ``training_pass`` is not a bool (NumPy
                bools, and None, 0 and 1 as in Brainstorm 0.5, are):
                ``'False'`` would be a training pass.
        """
        training_pass = _training_flag(training_pass)
        self._enter('forward_pass')
        try:
            prediction.check_parameters_set(self)
            self.buffer_manager.apply_context(context)
            with self.handler.network_pass(self._layer_types()):
                for name, layer in self.layers.items():
                    if name == 'Input':
                        continue
                    try:
                        layer.forward_pass(self.buffer[name], training_pass)
                    except Exception as error:
                        _name_the_layer(error, name, layer, 'forward_pass')
                        raise
            self._memory_moved = False
        finally:
            self._leave()

    def backward_pass(self, input_deltas: bool = True) -> None:
        """Compute all deltas and gradients, then apply gradient modifiers.

        Args:
            input_deltas: also compute the deltas of the Input layer's
                outputs (the gradient of the loss with respect to the data,
                in ``net.buffer.Input.output_deltas``). Steppers pass False:
                they need only the gradients, and the layers fed by the
                data then skip those products (PyTorch does not compute
                them either unless asked). Skipped deltas stay zero.

        Raises:
            NetworkValidationError: if :meth:`set_handler` moved the network
                to another handler since the last forward pass (its outputs
                are gone), or if ``input_deltas`` is not a bool (NumPy bools
                are).
        """
        input_deltas = _flag('backward_pass', 'input_deltas', input_deltas)
        self._enter('backward_pass')
        try:
            if self._memory_moved:
                raise NetworkValidationError(
                    f'{self!r}: backward_pass before a forward_pass on its '
                    'handler: set_handler (also when loading a network) '
                    'keeps the parameters but not the batch and the outputs '
                    'of a forward pass, so the gradients would come from '
                    'zeros. Call provide_external_data and forward_pass first.'
                )
            self._backward_pass(input_deltas)
        finally:
            self._leave()

    def _backward_pass(self, input_deltas: bool) -> None:
        self.buffer_manager.clear_backward_buffers()
        with self.handler.network_pass(self._layer_types()):
            for name, layer in reversed(self.layers.items()):
                if name == 'Input':
                    continue
                if not input_deltas:
                    layer.skip_input_deltas = self._data_fed_inputs[name]
                layer.overwrite_input_deltas = self._overwritten_inputs.get(
                    name, frozenset()
                )
                try:
                    layer.backward_pass(self.buffer[name])
                except Exception as error:
                    _name_the_layer(error, name, layer, 'backward_pass')
                    raise
                finally:
                    layer.skip_input_deltas = frozenset()
                    layer.overwrite_input_deltas = frozenset()
        self._add_exposed_gradients()
        # DataParallel applies them after summing the ranks' gradients
        if not getattr(self, '_gradient_modifiers_deferred', False):
            self.apply_gradient_modifiers()

    def _layer_types(self) -> frozenset:
        """The layer types for ``Handler.network_pass`` (``_type_names``)."""
        return self._type_names

    def _add_exposed_gradients(self) -> None:
        """Add the deltas of layers fed with ``'..parameters.X'`` to X's gradients.

        See :mod:`brainstorm.structure.layout`.
        """
        constant = self.buffer_manager.buffers[0]
        for lname, pname, start, stop in self.layout.get('@exposed_gradients', ()):
            gradient = self.buffer[lname].gradients[pname]
            deltas = reshape_view(constant[start:stop], gradient.shape)
            self.handler.add_tt(gradient, deltas, gradient)

    def get_loss_values(self) -> OrderedDict:
        """The losses of the last forward pass.

        Returns:
            ``{'total_loss': v}`` for one Loss layer; otherwise each Loss
            layer's name and ``'total_loss'`` (their sum; 0.0 if none).
        """
        losses = OrderedDict()
        for name in self.loss_layers:
            value = self.handler.get_numpy_copy(self.buffer[name].outputs.loss)
            losses[name] = float(np.sum(value))
        total = float(sum(losses.values()))
        if len(self.loss_layers) == 1:
            return OrderedDict(total_loss=total)
        losses['total_loss'] = total
        return losses

    def _loss_names(self) -> list:
        """The names :meth:`get_loss_values` returns, without a pass."""
        if len(self.loss_layers) == 1:
            return ['total_loss']
        return [*self.loss_layers, 'total_loss']

    def get_context(self):
        """The context (last time steps of recurrent state) of the last pass.

        Pass it as ``forward_pass(context=...)`` for the next batch. A
        reverse layer with a mask gives, for each sequence, the state at
        the sequence's start (where its backward run ended), not the state
        after the padding. A batch of no time steps hands on the context it
        began with.

        Raises:
            NetworkValidationError: after :meth:`set_handler` moved the
                memory, until the next forward pass (the states are gone).
        """
        context = self.buffer_manager.get_context()
        if context[2] is not None and self._memory_moved:
            raise NetworkValidationError(
                f'{self!r}: get_context before a forward_pass on its handler: '
                'set_handler (also when loading a network) keeps the '
                'parameters but not the states of the last pass (the context '
                'would be zeros). Run the forward pass again (with the '
                'context it began with) first.'
            )
        if context[2] is not None:
            for name, layer in self.layers.items():
                steps = getattr(layer, '_context_steps', None)
                steps = None if steps is None else steps(self.buffer[name])
                if steps is not None:
                    self._context_at_steps(context[2], name, layer, steps)
        return context

    def _context_at_steps(self, context, name: str, layer, steps) -> None:
        """Put each sequence's state at ``steps`` into ``context``.

        ``steps[b]`` is a time step of sequence ``b`` (-1: the context slot
        the pass began with), for the layer's internals that have one.
        """
        h = self.handler
        T = self.buffer_manager.time_size
        last = context.shape[0] - 1
        for iname, structure in layer.internal_shapes.items():
            if structure.is_backward_only or not structure.context_size:
                continue
            a, b = self.layout[name]['internals'][iname]['@slice']
            array = self.buffer[name].internals[iname]
            for seq, step in enumerate(int(s) for s in steps):
                if step == T - 1:
                    continue  # there already
                row = array[step] if step >= 0 else array[-1]
                h.copy_to(
                    row[seq : seq + 1].reshape((1, b - a)),
                    context[last, seq : seq + 1, a:b],
                )

    def predict(
        self,
        data,
        batch_size: int | None = None,
        out_name: str | None = None,
        check_finite: bool = True,
    ) -> np.ndarray:
        """The network's output for every sample of ``data``, in its order.

        A method of the network (as Keras's ``model.predict``): it needs
        nothing but the network and the data, and it runs on the network's
        own handler. The passes are no training passes (dropout is off,
        batch normalisation uses its running statistics); each batch
        starts without context (recurrent state).

        Args:
            data: input name -> array in the network's layout ``(T, B,
                *features)`` (``(B, *features)`` for batch-sized inputs).
                The targets are not needed for an output layer's
                ``'predictions'``, but are for its ``'loss'`` and for
                everything computed from it (the ``Loss`` layer). Where
                the output needs only one input, the array alone will do.
                An array-like such as an ``h5py.Dataset`` is read one
                batch at a time. Batch-first arrays
                ``(B, *features)`` for time-sized inputs are read as T = 1
                (the rule: one dimension less than the input's shape),
                and a time-sized output then comes back as ``(B, ...)``.
            batch_size: run at most this many samples at a time (None:
                all at once). The results do not depend on it. An output
                that is one value for the whole batch (a ``Loss``) cannot
                be split so: with fewer samples per batch than given, it
                is refused.
            out_name: the output to return, a path such as
                ``'Output.outputs.predictions'`` or the name of a layer
                with a single output; default ``net.output_name``.
            check_finite: refuse data that is not finite (as
                :meth:`provide_external_data`).

        Returns:
            A NumPy array: ``(T, B, ...)`` for a time-sized output,
            ``(B, ...)`` for a batch-sized one (or batch-first data), with
            the samples in the order of ``data``.

        Raises:
            UnknownOutputError: (a NetworkValidationError and KeyError)
                for an ``out_name`` that is not an output; it lists them.
            NetworkValidationError: for a missing input that the output
                needs (a ``MissingInputError``, also a KeyError), unknown
                input names, arrays that do not fit the inputs, or a bad
                ``batch_size``.
            UninitializedNetworkError: if the parameters were never set.

        The network is left as it was: the last batch's data, activations,
        deltas and context, its batch size, its parameters and gradients,
        and every random state (predict runs in memory of its own, freed
        when it returns).

        Example:
            >>> import numpy as np
            >>> import brainstorm as bs
            >>> inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
            >>> net = bs.Network.from_layer(inp >> out)
            >>> net.initialize(bs.initializers.Gaussian(0.1), seed=1)
            >>> x = np.random.default_rng(0).normal(size=(1, 5, 4))
            >>> net.predict(x, out_name='Output.outputs.predictions').shape
            (1, 5, 3)
        """
        self._enter('predict')
        try:
            return prediction.predict(self, data, batch_size, out_name, check_finite)
        finally:
            self._leave()

    # ------------------------------------------------- parameter masks -----

    @property
    def trainable_mask(self):
        """A handler array over ``buffer.parameters``, 1 where steppers update.

        It is 0 for parameters a layer maintains itself (e.g. BatchNorm's
        running statistics); the mask is None if everything is trainable.
        """
        if self._trainable_mask is None:
            untrained = self._untrained_parameters()
            if not untrained:
                return None
            mask = np.ones(self.buffer.parameters.shape, dtype=np.float64)
            for lname, pname in untrained:
                start, stop = self.layout[lname]['parameters'][pname]['@slice']
                offset = self.layout['parameters']['@slice'][0]
                mask[start - offset : stop - offset] = 0.0
            self._trainable_mask = self.handler.create_from_numpy(mask)
        return self._trainable_mask

    def _untrained_parameters(self) -> list:
        return [
            (lname, pname)
            for lname, layer in self.layers.items()
            for pname in layer.untrained_parameters
        ]

    # ----------------------------------------------------- initialize ------

    @declare(NetworkValidationError, seed=Arg(Optional(SEED), default=None))
    def initialize(
        self, default_or_init_dict=None, seed: int | None = None, **kwargs
    ) -> None:
        """Initialize all parameters.

        Args:
            default_or_init_dict: an initializer (used for everything) or a
                dict of layer-name patterns (``*`` matches any identifier
                characters) to initializers or to dicts of parameter-name
                patterns to initializers. ``'default'`` covers what no other
                pattern matches (an inherited ``'default'`` fills only the
                parameters that no sub-dict of a matching layer pattern
                names, as in 0.5; see
                :func:`brainstorm.structure.view_references.resolve_patterns`);
                ``'fallback'`` is used where the chosen
                initializer raises InitializationError (not for an array
                given for the parameter by a parameter pattern: values of
                another shape than the parameter's are an error). Values
                may be Initializers, numbers, lists or arrays.
            seed: makes the initialization reproducible.
            **kwargs: more layer patterns (must not repeat dict keys).

        Example:
            ``net.initialize({'default': Gaussian(0.01), 'Lstm*': {'bf': 1.0},
            'fallback': 0.0}, seed=42)``

        Raises:
            NetworkValidationError: for patterns matching nothing, or a
                parameter with no or several initializers or fallbacks.
        """
        refs = merge_refs(default_or_init_dict, kwargs)
        resolved = resolve_patterns(
            self.layers, refs, 'initialize', allow_fallback=True
        )
        init_rnd = self.rnd.create_random_state(seed)
        # every value first: a refused call leaves all parameters as they were
        values = []
        for lname in sorted(self.layers):
            layer = self.layers[lname]
            for pname in sorted(layer.parameter_shapes):
                param_seed = init_rnd.generate_seed()
                where = f'{lname}.{pname}'
                init, fallback = choose_initializer(
                    layer, pname, resolved[lname, pname], where
                )
                values.append(
                    (
                        lname,
                        pname,
                        self._initial_value(lname, pname, init, fallback, param_seed),
                    )
                )
        description = get_description(refs)
        self._enter('initialize')
        try:
            for lname, pname, array in values:
                self.handler.set_from_numpy(self.buffer[lname].parameters[pname], array)
        finally:
            self._leave()
        self.initializers = description
        self._parameters_set = True

    def _initial_value(
        self, lname: str, pname: str, init, fallback, seed: int
    ) -> np.ndarray:
        """Evaluate an initializer for the parameter ``lname.pname``, checked."""
        where = f'{lname}.{pname}'
        view = self.buffer[lname].parameters[pname]
        shape = tuple(view.shape)
        try:
            array = evaluate_initializer(init, shape, fallback, seed=seed)
        except NetworkValidationError:
            raise
        except (TypeError, ValueError, InitializationError) as err:
            raise NetworkValidationError(
                f'Initializing {where} (shape {shape}) failed: {err}'
            ) from None
        array = np.asarray(array)
        if array.shape != shape:
            raise NetworkValidationError(
                f'Initializer for {where} produced shape '
                f'{array.shape}, expected {shape}.'
            )
        bad = external_data.find_unrepresentable(array, self.handler.dtype)
        if bad is not None:
            index, value, what = bad
            raise NetworkValidationError(
                f'Initializing {where} with {_short_repr(init)}: it produced '
                f'{what} at index {index} ({value!r}); parameters must be '
                'finite.'
            )
        try:
            self.layers[lname].check_parameter_values(pname, array)
        except ValueError as err:
            raise NetworkValidationError(
                f'Initializing {where} with {_short_repr(init)}: {err}'
            ) from None
        return array

    # ------------------------------------------------------ modifiers ------

    def set_weight_modifiers(self, default_or_mod_dict=None, **kwargs) -> None:
        """Install value modifiers applied to parameters after each update.

        Same pattern syntax as :meth:`initialize` (without ``'fallback'``);
        values are a modifier or a list of modifiers. Where several patterns
        select one parameter, all their modifiers are installed and applied
        in the order of the dict (as in 0.5); one modifier object selected
        several times is installed once.
        """
        refs = merge_refs(default_or_mod_dict, kwargs)
        # both first: a refused call leaves the installed modifiers
        installed = install_modifiers(self.layers, refs, 'set_weight_modifiers')
        description = get_description(refs)
        self.weight_modifiers, self._weight_modifier_refs = installed, description

    def set_gradient_modifiers(self, default_or_mod_dict=None, **kwargs) -> None:
        """Install modifiers applied to gradients after each backward pass.

        Same pattern syntax as :meth:`set_weight_modifiers`.
        """
        refs = merge_refs(default_or_mod_dict, kwargs)
        # both first: a refused call leaves the installed modifiers
        installed = install_modifiers(self.layers, refs, 'set_gradient_modifiers')
        description = get_description(refs)
        self.gradient_modifiers, self._gradient_modifier_refs = installed, description

    def apply_weight_modifiers(self) -> None:
        """Apply all weight modifiers to their parameters."""
        for lname, params in self.weight_modifiers.items():
            for pname, mods in params.items():
                for mod in mods:
                    mod.rnd.set_seed(self.rnd.generate_seed())
                    mod(self.handler, self.buffer[lname].parameters[pname])

    def _start_weight_modifiers(self) -> None:
        """Let the weight modifiers read their views before training.

        ``Trainer.train`` calls it before its first update. It draws no
        random numbers and changes no parameter.
        """
        for lname, params in self.weight_modifiers.items():
            for pname, mods in params.items():
                for mod in mods:
                    # the class's method (0.5's modifiers lack it; an
                    # attribute of the instance by that name is its data)
                    own = getattr(mod, '__dict__', {})
                    if 'before_training' in own:
                        continue
                    method = getattr(mod, 'before_training', None)
                    if callable(method):
                        method(self.handler, self.buffer[lname].parameters[pname])

    def apply_gradient_modifiers(self) -> None:
        """Apply all gradient modifiers to their gradients."""
        for lname, params in self.gradient_modifiers.items():
            for pname, mods in params.items():
                for mod in mods:
                    mod.rnd.set_seed(self.rnd.generate_seed())
                    view = self.buffer[lname]
                    if isinstance(mod, GradientModifier):
                        mod(self.handler, view.parameters[pname], view.gradients[pname])
                    else:
                        mod(self.handler, view.gradients[pname])

    # ---------------------------------------------------- description ------

    def __describe__(self) -> dict:
        return {
            '@type': 'Network',
            'architecture': self.architecture,
            'handler': get_description(self.handler),
            'initializers': self.initializers,
            'weight_modifiers': self._weight_modifier_refs,
            'gradient_modifiers': self._gradient_modifier_refs,
            'output_name': self.output_name,
        }

    #: The keys of a network description (nothing else is accepted).
    _DESCRIPTION_KEYS = network_io.DESCRIPTION_KEYS

    @classmethod
    def __new_from_description__(cls, description: dict) -> Network:
        parts = network_io.check_description(description)
        handler = parts['handler']
        net = cls.from_architecture(description['architecture'])
        if handler:
            try:
                net.set_handler(create_from_description(handler, expected=Handler))
            except ImportError as err:
                # e.g. a network saved from a GPU, loaded without CUDA
                warnings.warn(
                    f'The network was saved with a {handler.get("@type")} '
                    f'that cannot be created here ({err}); using {net.handler!r} '
                    'instead.',
                    RuntimeWarning,
                    stacklevel=2,
                )
        # None (or an empty dict) is "none"; any other value, 0 included,
        # is what the call takes
        if parts['initializers'] is not None and parts['initializers'] != {}:
            net.initialize(parts['initializers'])
        for kind in ('weight_modifiers', 'gradient_modifiers'):
            if parts[kind] is not None and parts[kind] != {}:
                getattr(net, 'set_' + kind)(parts[kind])
        net.output_name = parts['output_name']
        return net

    # ----------------------------------------------------------- files -----

    @declare(
        NetworkValidationError,
        filename=Arg(FileName()),
        comment=Arg(Str(), default=''),
    )
    def save_as_hdf5(self, filename: str, comment: str = '') -> None:
        """Save the description and parameters to an HDF5 file.

        The file is written to a temporary name first and then moved into
        place, so an existing file is never left half-written.
        """
        network_io.write_network_file(
            filename, get_description(self), self.get('parameters'), comment
        )

    @classmethod
    def from_hdf5(cls, filename: str) -> Network:
        """Load a network saved with :meth:`save_as_hdf5`.

        Loading only builds what the description names: its checksums are
        verified (files written since checksums exist), and the sizes of its
        architecture are checked against the stored parameters before any
        memory is allocated (see :ref:`sharing-files-safely`).

        Raises:
            NetworkValidationError: if the file is missing, damaged,
                inconsistent or not a brainstorm network file, naming the
                file and what is wrong.
        """
        description, parameters = network_io.read_network_file(filename)
        return _build_from_file(
            description, parameters, filename, NetworkValidationError, 'Network file'
        )

    def __repr__(self):
        return f'<Network: {len(self.layers)} layers {list(self.layers)}>'


def _build_from_file(
    description: dict, parameters: np.ndarray, filename: str, error: type, what: str
) -> Network:
    """The network of a checked description, holding ``parameters``.

    Args:
        description: the checked network description.
        parameters: the stored parameters.
        filename: the file, for messages.
        error: the ValidationError subclass to raise.
        what: names the kind of file, for messages (``'Network file'``).
    """
    return network_io.build_from_file(
        Network, description, parameters, filename, error, what
    )


def _name_the_layer(error: Exception, name: str, layer, method: str) -> None:
    """Add a note naming the layer whose pass raised ``error`` (Python 3.11+).

    A handler op's error names the op; the note says which layer called it.
    """
    add_note = getattr(error, 'add_note', None)
    if add_note is not None:
        add_note(f"raised in the {method} of layer '{name}' ({type(layer).__name__})")
