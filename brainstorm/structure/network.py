"""The Network: layers, their memory, and everything to run and inspect them."""

from __future__ import annotations

import copy
import json
import warnings
from collections import OrderedDict

import numpy as np

from brainstorm.arguments import SEED, Arg, Instance, Optional, Str, declare
from brainstorm.describable import create_from_description, get_description
from brainstorm.randomness import Seedable
from brainstorm.structure.architecture import (
    generate_architecture,
    instantiate_layers_from_architecture,
    validate_architecture,
)
from brainstorm.structure.buffers import BufferManager
from brainstorm.structure.layout import create_layout
from brainstorm.structure.view_references import (
    pattern_matches,
    resolve_patterns,
)
from brainstorm.utils import (
    CheckedReader,
    DescriptionError,
    InitializationError,
    NetworkValidationError,
    ValidationError,
    add_checksums,
    get_brainstorm_info,
    open_hdf5,
    reshape_view,
    write_atomically,
)

__all__ = ['Network']

NETWORK_FILE_FORMAT = b'Network file v1.0'
RESERVED_LAYER_NAMES = {'parameters', 'gradients'}


class MissingInputError(NetworkValidationError, KeyError):
    """A data dict lacks an input the network needs."""

    def __str__(self):
        return str(self.args[0])


# The matcher is shared with MultiStepper; the old private names stay.
_pattern_matches = pattern_matches
_resolve_patterns = resolve_patterns


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
        buffer: the root BufferView (``parameters``, ``gradients`` and one
            view per layer).
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

    def __init__(self, layers, buffer_manager, architecture, seed=None,
                 handler=None):
        super().__init__(seed)
        from brainstorm.handlers import default_handler
        self.layers = layers
        self.buffer_manager = buffer_manager
        self.architecture = architecture
        from brainstorm.layers.loss_layer import LossLayerImpl
        self.loss_layers = [name for name, layer in layers.items()
                            if isinstance(layer, LossLayerImpl)]
        self.initializers = {}
        self.weight_modifiers = OrderedDict()
        self.gradient_modifiers = OrderedDict()
        self._weight_modifier_refs = {}
        self._gradient_modifier_refs = {}
        self.output_name = None
        # layer name -> its inputs fed only by the Input layer (the data)
        self._data_fed_inputs = {
            name: frozenset(
                in_name for in_name in layer.in_shapes
                if {c.start_layer for c in layer.incoming
                    if c.input_name == in_name} == {'Input'})
            for name, layer in layers.items()}
        self.handler = None
        self.set_handler(handler or default_handler)
        self.buffer_manager.skip_clearing(self._overwritten_gradients())

    def _overwritten_gradients(self) -> list:
        """Constant-buffer ranges of the gradients that their layers
        overwrite in every backward pass (``overwrites_gradients``)."""
        ranges = []
        for name, layer in self.layers.items():
            if not layer.overwrites_gradients:
                continue
            for pname in layer.parameter_shapes:
                if pname not in layer.computes_no_gradients_for:
                    node = self.layout[name]['gradients'][pname]
                    ranges.append(tuple(node['@slice']))
        return ranges

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
        architecture, layers, layout = _plan(architecture)
        from brainstorm.handlers import default_handler
        buffer_manager = BufferManager(layout, default_handler)
        return cls(layers, buffer_manager, architecture)

    # --------------------------------------------------------- inspection ---

    @property
    def buffer(self):
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
        """
        from brainstorm.structure.buffer_views import BufferView
        node = self.buffer[buffer_path]
        if isinstance(node, BufferView):
            raise KeyError(f"'{buffer_path}' is a view, not a buffer. Its "
                           f'entries: {node.keys()}')
        return self.handler.get_numpy_copy(node)

    def get_input(self, input_name: str) -> np.ndarray:
        """A NumPy copy of the data last provided for ``input_name``."""
        return self.get('Input.outputs.' + input_name)

    # --------------------------------------------------------- handlers ----

    @declare(NetworkValidationError, new_handler=Arg(Instance(
        'brainstorm.handlers.base_handler:Handler')))
    def set_handler(self, new_handler) -> None:
        """Move all memory to ``new_handler`` and compute with it; parameters
        are kept."""
        if self.handler is not new_handler:
            if self.buffer_manager.handler is not new_handler:
                self.buffer_manager.set_handler(new_handler)
            self.handler = new_handler
        for layer in self.layers.values():
            layer.set_handler(new_handler)
        self._trainable_mask = None

    # -------------------------------------------------------- running ------

    def provide_external_data(self, data: dict, all_inputs: bool = True):
        """Put a batch of data into the Input layer's outputs.

        Args:
            data: input name -> array of shape ``(T, B, *features)`` (or
                ``(B, *features)`` for batch-sized inputs).
            all_inputs: if False, inputs missing from ``data`` are skipped.

        Raises:
            NetworkValidationError: for missing names, wrong shapes or ranks,
                inconsistent T/B, or non-numeric data.
        """
        if not hasattr(data, 'items'):
            raise NetworkValidationError(
                f'Data must be a dict of input names to arrays. Received: '
                f'{type(data).__name__}')
        input_layer = self.layers['Input']
        h = self.handler
        arrays = {}
        for name, structure in input_layer.out_shapes.items():
            if name not in data:
                if all_inputs:
                    raise MissingInputError(
                        f"Data for input '{name}' is missing. The network's "
                        f'inputs are {list(input_layer.out_shapes)}; received '
                        f'{list(data)}.')
                continue
            arrays[name] = self._check_data(name, data[name], structure)
        if not arrays:
            return
        T = B = None
        for name, array in arrays.items():
            t = input_layer.out_shapes[name].buffer_type
            shape = tuple(array.shape)
            if t == 2:
                tb = shape[:2]
                if T is None:
                    T, B = tb
                elif tb != (T, B):
                    raise NetworkValidationError(
                        f"Input '{name}': time and batch size {tb} differ "
                        f'from those of the other inputs {(T, B)}.')
        for name, array in arrays.items():
            if input_layer.out_shapes[name].buffer_type == 1:
                if B is None:
                    B = array.shape[0]
                elif array.shape[0] != B:
                    raise NetworkValidationError(
                        f"Input '{name}': batch size {array.shape[0]} differs "
                        f'from that of the other inputs ({B}).')
        self.buffer_manager.resize(T if T is not None else 1, B)
        outputs = self.buffer.Input.outputs
        for name, array in arrays.items():
            if isinstance(array, np.ndarray):
                h.set_from_numpy(outputs[name], array)
            else:
                h.copy_to(array, outputs[name])

    def _check_data(self, name, array, structure):
        expected = structure.shape
        if not hasattr(array, 'shape') or not hasattr(array, 'dtype'):
            raise NetworkValidationError(
                f"Input '{name}': expected an array of shape {expected}. "
                f'Received: {type(array).__name__}')
        if isinstance(array, np.ma.MaskedArray):
            # its mask would be dropped silently
            raise NetworkValidationError(
                f"Input '{name}': masked arrays are not supported (the mask "
                'would be lost). Pass array.filled(value) and give the mask '
                "as an input of its own (e.g. 'mask'). Received: "
                'MaskedArray')
        if isinstance(array, np.ndarray):
            if not (np.issubdtype(array.dtype, np.number)
                    or array.dtype == np.bool_) or \
                    np.issubdtype(array.dtype, np.complexfloating):
                raise NetworkValidationError(
                    f"Input '{name}': expected numeric data. Received dtype "
                    f'{array.dtype}')
        shape = tuple(array.shape)
        if len(shape) != len(expected):
            raise NetworkValidationError(
                f"Input '{name}': expected {len(expected)} dimensions "
                f'{expected}. Received shape {shape}')
        lead = structure.buffer_type
        if shape[lead:] != structure.feature_shape:
            raise NetworkValidationError(
                f"Input '{name}': expected feature shape "
                f'{structure.feature_shape} (full shape {expected}). '
                f'Received shape {shape}')
        return array

    def forward_pass(self, training_pass: bool = False, context=None) -> None:
        """Run all layers forward.

        Args:
            training_pass: whether this pass is for training (dropout etc.).
            context: a context from :meth:`get_context` to continue from;
                the context slots are zeroed if None.
        """
        self.buffer_manager.apply_context(context)
        for name, layer in self.layers.items():
            if name != 'Input':
                layer.forward_pass(self.buffer[name], training_pass)

    def backward_pass(self, input_deltas: bool = True) -> None:
        """Compute all deltas and gradients, then apply gradient modifiers.

        Args:
            input_deltas: also compute the deltas of the Input layer's
                outputs (the gradient of the loss with respect to the data,
                in ``net.buffer.Input.output_deltas``). Steppers pass False:
                they need only the gradients, and the layers fed by the
                data then skip those products (PyTorch does not compute
                them either unless asked). Skipped deltas stay zero.
        """
        self.buffer_manager.clear_backward_buffers()
        for name, layer in reversed(self.layers.items()):
            if name == 'Input':
                continue
            if not input_deltas:
                layer.skip_input_deltas = self._data_fed_inputs[name]
            try:
                layer.backward_pass(self.buffer[name])
            finally:
                layer.skip_input_deltas = frozenset()
        self._add_exposed_gradients()
        self.apply_gradient_modifiers()

    def _add_exposed_gradients(self) -> None:
        """Add the deltas of layers fed with ``'..parameters.X'`` to the
        gradients of ``X`` (see :mod:`brainstorm.structure.layout`)."""
        constant = self.buffer_manager.buffers[0]
        for lname, pname, start, stop in self.layout.get(
                '@exposed_gradients', ()):
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
            value = self.handler.get_numpy_copy(
                self.buffer[name].outputs.loss)
            losses[name] = float(np.sum(value))
        total = float(sum(losses.values()))
        if len(self.loss_layers) == 1:
            return OrderedDict(total_loss=total)
        losses['total_loss'] = total
        return losses

    def get_context(self):
        """The context (last time steps of recurrent state) of the last
        forward pass, to pass as ``forward_pass(context=...)`` for the next
        batch."""
        return self.buffer_manager.get_context()

    # ------------------------------------------------- parameter masks -----

    @property
    def trainable_mask(self):
        """A handler array over ``buffer.parameters``: 1 where steppers may
        update, 0 for parameters a layer maintains itself (e.g. BatchNorm's
        running statistics); None if everything is trainable."""
        if self._trainable_mask is None:
            untrained = self._untrained_parameters()
            if not untrained:
                return None
            mask = np.ones(self.buffer.parameters.shape, dtype=np.float64)
            for lname, pname in untrained:
                start, stop = self.layout[lname]['parameters'][pname]['@slice']
                offset = self.layout['parameters']['@slice'][0]
                mask[start - offset:stop - offset] = 0.
            self._trainable_mask = self.handler.create_from_numpy(mask)
        return self._trainable_mask

    def _untrained_parameters(self) -> list:
        return [(lname, pname) for lname, layer in self.layers.items()
                for pname in layer.untrained_parameters]

    # ----------------------------------------------------- initialize ------

    @declare(NetworkValidationError, seed=Arg(Optional(SEED), default=None))
    def initialize(self, default_or_init_dict=None, seed: int | None = None,
                   **kwargs) -> None:
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
                initializer raises InitializationError. Values may be
                Initializers, numbers, lists or arrays.
            seed: makes the initialization reproducible.
            **kwargs: more layer patterns (must not repeat dict keys).

        Example:
            ``net.initialize({'default': Gaussian(0.01), 'Lstm*': {'bf': 1.0},
            'fallback': 0.0}, seed=42)``

        Raises:
            NetworkValidationError: for patterns matching nothing, or a
                parameter with no or several initializers or fallbacks.
        """
        from brainstorm.initializers import evaluate_initializer
        refs = self._merge_refs(default_or_init_dict, kwargs)
        resolved = _resolve_patterns(self.layers, refs, 'initialize',
                                     allow_fallback=True)
        init_rnd = self.rnd.create_random_state(seed)
        h = self.handler
        for lname in sorted(self.layers):
            layer = self.layers[lname]
            untrained = layer.untrained_parameters
            for pname in sorted(layer.parameter_shapes):
                values, fallbacks, explicit = resolved[lname, pname]
                param_seed = init_rnd.generate_seed()
                view = self.buffer[lname].parameters[pname]
                if pname in untrained and not explicit:
                    values, fallbacks = [untrained[pname]], []
                where = f'{lname}.{pname}'
                if not values:
                    raise NetworkValidationError(
                        f'No initializer for {where}. Add a \'default\' or a '
                        'pattern matching it.')
                if len(values) > 1:
                    raise NetworkValidationError(
                        f'Multiple initializers for {where}: {values}')
                if len(fallbacks) > 1:
                    raise NetworkValidationError(
                        f'Multiple fallbacks for {where}: {fallbacks}')
                init = _as_initializer(values[0], where)
                # Initializers that depend on the parameter (LstmOptInit
                # picks the gate of an Lstm parameter) choose here.
                select = getattr(init, 'select_for', None)
                if select is not None:
                    try:
                        init = _as_initializer(select(layer, pname), where)
                    except ValidationError as err:
                        raise NetworkValidationError(
                            f'Initializing {where}: {err}') from None
                fallback = _as_initializer(fallbacks[0], where) \
                    if fallbacks else None
                shape = tuple(view.shape)
                try:
                    array = evaluate_initializer(init, shape, fallback,
                                                 seed=param_seed)
                except NetworkValidationError:
                    raise
                except (TypeError, ValueError, InitializationError) as err:
                    raise NetworkValidationError(
                        f'Initializing {where} (shape {shape}) failed: {err}') \
                        from None
                array = np.asarray(array)
                if array.shape != shape:
                    raise NetworkValidationError(
                        f'Initializer for {where} produced shape '
                        f'{array.shape}, expected {shape}.')
                h.set_from_numpy(view, array)
        self.initializers = get_description(refs)

    @staticmethod
    def _merge_refs(default_or_dict, kwargs) -> dict:
        if default_or_dict is None:
            refs = {}
        elif isinstance(default_or_dict, dict):
            refs = dict(default_or_dict)
        else:
            refs = {'default': default_or_dict}
        for key, value in kwargs.items():
            if key in refs:
                raise TypeError(f"Conflicting values for '{key}': given both in"
                                ' the dict and as a keyword argument.')
            refs[key] = value
        return refs

    # ------------------------------------------------------ modifiers ------

    def set_weight_modifiers(self, default_or_mod_dict=None, **kwargs) -> None:
        """Install value modifiers applied to parameters after each update.

        Same pattern syntax as :meth:`initialize` (without ``'fallback'``);
        values are a modifier or a list of modifiers. Where several patterns
        select one parameter, all their modifiers are installed and applied
        in the order of the dict (as in 0.5).
        """
        refs = self._merge_refs(default_or_mod_dict, kwargs)
        self.weight_modifiers = self._install_modifiers(refs,
                                                        'set_weight_modifiers')
        self._weight_modifier_refs = get_description(refs)

    def set_gradient_modifiers(self, default_or_mod_dict=None,
                               **kwargs) -> None:
        """Install modifiers applied to gradients after each backward pass.

        Same pattern syntax as :meth:`set_weight_modifiers`.
        """
        refs = self._merge_refs(default_or_mod_dict, kwargs)
        self.gradient_modifiers = self._install_modifiers(
            refs, 'set_gradient_modifiers')
        self._gradient_modifier_refs = get_description(refs)

    def _install_modifiers(self, refs, what) -> OrderedDict:
        resolved = _resolve_patterns(self.layers, refs, what,
                                     allow_fallback=False)
        installed: OrderedDict = OrderedDict()
        for lname, layer in self.layers.items():
            untrained = layer.untrained_parameters
            for pname in layer.parameter_shapes:
                values, _, explicit = resolved[lname, pname]
                if not values or (pname in untrained and not explicit):
                    continue
                # Several patterns may name one parameter: all their
                # modifiers are installed, in the order of the dict (0.5).
                mods: list = []
                for value in values:
                    mods.extend(value if isinstance(value, (list, tuple))
                                else [value])
                copies = []
                for mod in mods:
                    if not callable(mod):
                        raise NetworkValidationError(
                            f'{what}: {lname}.{pname} got {mod!r}, which is '
                            'not a modifier.')
                    mod = copy.deepcopy(mod)
                    mod.layer_name, mod.view_name = lname, pname
                    copies.append(mod)
                installed.setdefault(lname, OrderedDict())[pname] = copies
        return installed

    def apply_weight_modifiers(self) -> None:
        """Apply all weight modifiers to their parameters."""
        for lname, params in self.weight_modifiers.items():
            for pname, mods in params.items():
                for mod in mods:
                    mod.rnd.set_seed(self.rnd.generate_seed())
                    mod(self.handler, self.buffer[lname].parameters[pname])

    def apply_gradient_modifiers(self) -> None:
        """Apply all gradient modifiers to their gradients."""
        from brainstorm.value_modifiers import GradientModifier
        for lname, params in self.gradient_modifiers.items():
            for pname, mods in params.items():
                for mod in mods:
                    mod.rnd.set_seed(self.rnd.generate_seed())
                    view = self.buffer[lname]
                    if isinstance(mod, GradientModifier):
                        mod(self.handler, view.parameters[pname],
                            view.gradients[pname])
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
    _DESCRIPTION_KEYS = frozenset({'@type', 'architecture', 'handler',
                                   'initializers', 'weight_modifiers',
                                   'gradient_modifiers', 'output_name'})

    @classmethod
    def __new_from_description__(cls, description: dict) -> Network:
        from brainstorm.handlers.base_handler import Handler
        from brainstorm.initializers import Initializer
        from brainstorm.value_modifiers import GradientModifier, ValueModifier
        unknown = sorted(set(description) - cls._DESCRIPTION_KEYS, key=str)
        if unknown:
            raise DescriptionError(
                f'Network (from a description): unknown key(s) {unknown}. '
                f'Allowed keys: {sorted(cls._DESCRIPTION_KEYS)}')
        if 'architecture' not in description:
            raise DescriptionError('Network (from a description): the key '
                                   "'architecture' is missing.")
        output_name = description.get('output_name')
        if output_name is not None and not isinstance(output_name, str):
            raise NetworkValidationError(
                'Network (from a description): output_name must be a str or '
                f'None. Received: output_name={output_name!r}')
        modifiers = (ValueModifier, GradientModifier)
        # build every described object first (each @type checked for its
        # place), so nothing is built for a description refused later
        handler = description.get('handler')
        parts = {
            'initializers': create_from_description(
                description.get('initializers'), expected=Initializer),
            'weight_modifiers': create_from_description(
                description.get('weight_modifiers'), expected=modifiers),
            'gradient_modifiers': create_from_description(
                description.get('gradient_modifiers'), expected=modifiers),
        }
        if handler is not None and (not isinstance(handler, dict)
                                    or '@type' not in handler):
            raise DescriptionError(
                'Network (from a description): handler must be a handler '
                f"description (a dict with '@type'). Received: {handler!r:.80}")
        net = cls.from_architecture(description['architecture'])
        if handler:
            try:
                net.set_handler(create_from_description(handler,
                                                        expected=Handler))
            except ImportError as err:
                # e.g. a network saved from a GPU, loaded without CUDA
                warnings.warn(
                    f'The network was saved with a {handler.get("@type")} '
                    f'that cannot be created here ({err}); using the default '
                    'NumpyHandler instead.', RuntimeWarning, stacklevel=2)
        if parts['initializers']:
            net.initialize(parts['initializers'])
        if parts['weight_modifiers']:
            net.set_weight_modifiers(parts['weight_modifiers'])
        if parts['gradient_modifiers']:
            net.set_gradient_modifiers(parts['gradient_modifiers'])
        net.output_name = output_name
        return net

    # ----------------------------------------------------------- files -----

    @declare(NetworkValidationError, filename=Arg(Str(nonempty=True)),
             comment=Arg(Str(), default=''))
    def save_as_hdf5(self, filename: str, comment: str = '') -> None:
        """Save the description and parameters to an HDF5 file.

        The file is written to a temporary name first and then moved into
        place, so an existing file is never left half-written.
        """
        import h5py
        description = json.dumps(get_description(self)).encode('utf-8')
        parameters = self.get('parameters')

        def write(tmp):
            with h5py.File(tmp, 'w') as f:
                f.attrs['info'] = np.bytes_(get_brainstorm_info())
                f.attrs['format'] = np.bytes_(NETWORK_FILE_FORMAT)
                if comment:
                    f.attrs['comment'] = np.bytes_(comment.encode('utf-8'))
                f.create_dataset('description',
                                 data=np.frombuffer(description, dtype=np.uint8))
                f.create_dataset('parameters', data=parameters,
                                 compression='gzip')
                add_checksums(f)

        write_atomically(filename, write)

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
        f, fmt = open_hdf5(filename, NetworkValidationError, 'network file')
        with f:
            try:
                description, parameters = _read_network_file(f, fmt,
                                                             filename)
            except ValidationError:
                raise
            except Exception as err:  # whatever h5py or NumPy raise
                raise NetworkValidationError(
                    f"Network file '{filename}' is corrupt: "
                    f'{type(err).__name__}: {err}') from None
        return _build_from_file(description, parameters, filename,
                                NetworkValidationError, 'Network file')

    def __repr__(self):
        return f'<Network: {len(self.layers)} layers {list(self.layers)}>'


def _as_initializer(value, where: str):
    from brainstorm.initializers import ArrayInitializer, Initializer
    if isinstance(value, Initializer):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, (list, np.ndarray)):
        return ArrayInitializer(value)
    raise NetworkValidationError(
        f'Initializer for {where} must be an Initializer, a number, a list or '
        f'an array. Received: {value!r}')


# ------------------------------------------------------------- loading -----

def _plan(architecture: dict) -> tuple:
    """Validate an architecture; make its layers and layout (no memory)."""
    validate_architecture(architecture)
    reserved = RESERVED_LAYER_NAMES & set(architecture)
    if reserved:
        raise NetworkValidationError(
            f'Layer names {sorted(reserved)} are reserved for the root '
            'buffers of a network; choose other names.')
    architecture = copy.deepcopy(architecture)
    layers = instantiate_layers_from_architecture(architecture)
    return architecture, layers, create_layout(layers)


def _constant_size(layout: dict) -> int:
    """Elements of the constant buffer (parameters, gradients, ...)."""
    from brainstorm.structure.layout import get_buffer_type
    size = 0
    todo = [layout]
    while todo:
        node = todo.pop()
        for key, child in node.items():
            if key.startswith('@') or not isinstance(child, dict):
                continue
            if child.get('@type') == 'array':
                if get_buffer_type(child['@shape']) == 0:
                    size = max(size, int(child['@slice'][1]))
            else:
                todo.append(child)
    return size


def check_stored_sizes(description, n_parameters: int, where: str,
                       error: type) -> None:
    """Check a stored network description against its stored parameters
    before anything is allocated.

    The architecture's layers and layout are computed (no memory); the
    number of parameters must equal ``n_parameters``, and the constant
    buffer (parameters, gradients and constant internals) may not exceed
    a small multiple of it, so a file cannot make the loader allocate much
    more than it stores.

    Args:
        description: the stored network description.
        n_parameters: the length of the stored parameter array.
        where: names the file, for messages.
        error: the ValidationError subclass to raise.
    """
    if not (isinstance(description, dict)
            and description.get('@type') == 'Network'):
        raise error(f'{where} does not describe a Network.')
    try:
        # _plan validates what the file holds (None or any type included)
        _, _, layout = _plan(
            description.get('architecture'))  # type: ignore[arg-type]
        needed = int(layout['parameters']['@slice'][1]) - \
            int(layout['parameters']['@slice'][0])
        constant = _constant_size(layout)
    except ValidationError as err:
        raise error(f'{where} holds an invalid network architecture: '
                    f'{err}') from None
    except Exception as err:  # huge or malformed numbers in the layers
        raise error(f'{where} holds an invalid network architecture: '
                    f'{type(err).__name__}: {err}') from None
    if needed != n_parameters:
        raise error(f'{where} is corrupt: it holds ({n_parameters},) '
                    f'parameters, its architecture needs ({needed},).')
    limit = 3 * n_parameters + _CONSTANT_ALLOWANCE
    if constant > limit:
        raise error(f'{where}: its architecture needs a constant buffer of '
                    f'{constant} elements for {n_parameters} parameters '
                    f'(at most {limit} allowed).')


_CONSTANT_ALLOWANCE = 1 << 16


def _read_network_file(f, fmt, filename: str) -> tuple:
    """The description and the parameters of an open network file,
    checked (see :meth:`Network.from_hdf5`)."""
    import h5py
    if not isinstance(fmt, bytes) or fmt != NETWORK_FILE_FORMAT or \
            not isinstance(f.get('description'), h5py.Dataset) or \
            not isinstance(f.get('parameters'), h5py.Dataset):
        raise NetworkValidationError(
            f"'{filename}' is not a brainstorm network file: expected "
            f"format attribute {NETWORK_FILE_FORMAT!r} and datasets "
            "'description' and 'parameters'. Received format "
            f'{fmt!r} and datasets {sorted(f.keys())}.')
    reader = CheckedReader(f, filename, NetworkValidationError,
                           'Network file')
    raw = reader.array('description')
    try:
        # ours: a uint8 array; Brainstorm 0.5: a (variable-length) string
        if isinstance(raw, np.ndarray):
            if raw.dtype != np.uint8 or raw.ndim != 1:
                reader.fail('description', 'expected UTF-8 JSON. Received '
                            f'a {raw.dtype} array of shape {raw.shape}')
            text = raw.tobytes().decode('utf-8')
        elif isinstance(raw, bytes):
            text = raw.decode('utf-8')
        else:
            text = str(raw)
        description = json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        reader.fail('description', f'it is not UTF-8 JSON ({err}).')
    dataset = f['parameters']
    if dataset.ndim != 1 or dataset.dtype.kind not in 'iuf':
        reader.fail('parameters', 'expected a 1-d numeric array. Received '
                    f'{dataset.dtype} of shape {dataset.shape}')
    where = f"Network file '{filename}'"
    check_stored_sizes(description, int(dataset.shape[0]), where,
                       NetworkValidationError)
    parameters = reader.array('parameters', shape=dataset.shape)
    return description, np.asarray(parameters)


def _build_from_file(description: dict, parameters: np.ndarray,
                     filename: str, error: type, what: str) -> Network:
    """The network of a checked description, holding ``parameters``."""
    try:
        net = create_from_description(description, expected=Network)
    except Exception as err:  # a crafted description may break anything
        raise error(f"{what} '{filename}' holds an invalid network "
                    f'description: {type(err).__name__}: {err}') from None
    if not isinstance(net, Network):
        raise error(f"{what} '{filename}' does not describe a Network.")
    expected = tuple(net.buffer.parameters.shape)
    if parameters.shape != expected:
        raise error(f"{what} '{filename}' is corrupt: it holds "
                    f'{parameters.shape} parameters, its architecture needs '
                    f'{expected}.')
    net.handler.set_from_numpy(net.buffer.parameters, parameters)
    return net
