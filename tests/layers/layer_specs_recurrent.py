"""Registry entries for the recurrent layers Lstm, Clockwork and
ClockworkLstm (see test_layer_registry.py).

The harness fills the context slots of outputs and forward internals with
random values, so every entry also checks exact gradients with a non-zero
context. Clockwork entries fix ``timing`` (random values would be
meaningless) to a non-trivial pattern with sequences longer than the
largest period.
"""

from brainstorm.layers.clockwork_layer import ClockworkLayerImpl
from brainstorm.layers.clockwork_lstm_layer import ClockworkLstmLayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl

LONG_CONFIGURATIONS = [(1, 1), (5, 1), (7, 3)]

LAYER_SPECS = [
    dict(id='Lstm', layer_class=LstmLayerImpl, in_shapes={'default': (3,)},
         kwargs={'size': 4}, activation=True),
    dict(id='Lstm-multidim', layer_class=LstmLayerImpl,
         in_shapes={'default': (2, 3)}, kwargs={'size': 3}, activation=True),
    dict(id='Lstm-default-size', layer_class=LstmLayerImpl,
         in_shapes={'default': (3,)}, kwargs={},
         configurations=LONG_CONFIGURATIONS),
]

TIMING = {'timing': [1, 2, 3, 1]}

LAYER_SPECS += [
    dict(id='Clockwork', layer_class=ClockworkLayerImpl,
         in_shapes={'default': (3,)}, kwargs={'size': 4}, activation=True,
         spec={'inits': TIMING}),
    dict(id='Clockwork-long', layer_class=ClockworkLayerImpl,
         in_shapes={'default': (2, 3)}, kwargs={'size': 4},
         spec={'inits': TIMING}, configurations=LONG_CONFIGURATIONS),
    dict(id='Clockwork-every-step', layer_class=ClockworkLayerImpl,
         in_shapes={'default': (3,)}, kwargs={'size': 2},
         spec={'inits': {'timing': [1, 1]}}, configurations=[(3, 2)]),
    dict(id='ClockworkLstm', layer_class=ClockworkLstmLayerImpl,
         in_shapes={'default': (3,)}, kwargs={'size': 4}, activation=True,
         spec={'inits': TIMING}),
    dict(id='ClockworkLstm-long', layer_class=ClockworkLstmLayerImpl,
         in_shapes={'default': (2, 3)}, kwargs={'size': 4},
         spec={'inits': TIMING}, configurations=LONG_CONFIGURATIONS),
]
