"""Tools for building, inspecting and evaluating networks."""

from __future__ import annotations

from brainstorm.structure.construction import ConstructionWrapper

__all__ = ['get_in_out_layers']


def _as_shape(shape, what: str) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0
            for s in shape):
        raise ValueError(f'{what} must be a positive int or a tuple of '
                         f'positive ints. Received: {shape!r}')
    return tuple(shape)


def get_in_out_layers(task_type: str, in_shape, out_shape,
                      data_name: str = 'default', targets_name: str = 'targets',
                      projection_name: str | None = None,
                      outlayer_name: str | None = None,
                      mask_name: str | None = None,
                      use_conv: bool | None = None) -> tuple[
                          ConstructionWrapper, ConstructionWrapper]:
    """Create an Input layer and an output stack for a standard task.

    Args:
        task_type: ``'classification'`` (SoftmaxCE), ``'multi-label'``
            (SigmoidCE) or ``'regression'`` (SquaredError).
        in_shape: feature shape of the data (int or tuple).
        out_shape: feature shape of the output (int or tuple); for
            classification the last entry is the number of classes.
        data_name, targets_name: names of the Input outputs.
        projection_name: name of the output projection (default
            ``outlayer_name + '_projection'``).
        outlayer_name: name of the output layer (default ``'Output'``).
        mask_name: if given, an Input output ``('T', 'B', 1)`` masking the
            loss.
        use_conv: force a 1x1 Convolution2D (True) or FullyConnected (False)
            projection; by default chosen from ``len(out_shape)``.

    Returns:
        ``(input_layer, projection)``: connect your hidden layers between
        them, e.g. ``inp >> FullyConnected(100) >> proj``.

    Example:
        >>> import brainstorm as bs
        >>> inp, out = bs.tools.get_in_out_layers('classification', 784, 10)
        >>> net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(50)
        ...                             >> out)
        >>> list(net.layers)
        ['Input', 'FullyConnected', 'Output_projection', 'Output', 'Loss']
    """
    from brainstorm import layers
    in_shape = _as_shape(in_shape, 'in_shape')
    out_shape = _as_shape(out_shape, 'out_shape')
    output_layers = {'classification': 'SoftmaxCE',
                     'multi-label': 'SigmoidCE', 'regression': 'SquaredError'}
    if task_type not in output_layers:
        raise ValueError(f'Unknown task_type {task_type!r}: use one of '
                         f'{sorted(output_layers)}.')
    if task_type == 'classification':
        target_shape = out_shape[:-1] + (1,)
    else:
        target_shape = out_shape
    out_shapes = {data_name: ('T', 'B') + in_shape,
                  targets_name: ('T', 'B') + target_shape}
    if mask_name:
        out_shapes[mask_name] = ('T', 'B', 1)
    outlayer_name = outlayer_name or 'Output'
    projection_name = projection_name or outlayer_name + '_projection'

    if use_conv is False or (use_conv is None and len(out_shape) == 1):
        projection = layers.FullyConnected(out_shape, activation='linear',
                                    name=projection_name)
    elif use_conv is True or (use_conv is None and len(out_shape) == 3):
        projection = layers.Convolution2D(out_shape[-1], kernel_size=(1, 1),
                                   activation='linear', name=projection_name)
    else:
        raise ValueError(f'Cannot choose a projection for out_shape '
                         f'{out_shape}: give 1 (FullyConnected) or 3 '
                         '(Convolution2D) dimensions, or set use_conv.')
    inp = layers.Input(out_shapes)
    output = getattr(layers, output_layers[task_type])(name=outlayer_name)
    projection >> output
    inp - targets_name >> 'targets' - output
    if mask_name:
        mask = layers.Mask()
        output - 'loss' >> mask
        inp - mask_name >> 'mask' - mask
        mask >> layers.Loss()
    else:
        output - 'loss' >> layers.Loss()
    return inp - data_name, projection
