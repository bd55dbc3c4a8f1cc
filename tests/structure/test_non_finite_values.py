"""Non-finite values given to a network: initializers and external data.

Before, ``net.initialize(float('nan'))`` was accepted, and data given
straight to ``provide_external_data`` was never checked (NaN, inf and
float64 values beyond float32 went through silently).
"""

import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.initializers import Initializer
from brainstorm.structure.external_data import find_unrepresentable
from brainstorm.utils import NetworkValidationError

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
F32_MAX = float(np.finfo(np.float32).max)


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    return bs.Network.from_layer(inp >> out)


# ------------------------------------------------------------ initialize ---


@pytest.mark.parametrize(
    'value, what',
    [
        (math.nan, 'NaN'),
        (math.inf, 'infinite'),
        (-math.inf, 'infinite'),
        (1e39, 'range'),
    ],
)
def test_initialize_refuses_a_non_finite_number(value, what):
    net = _net()
    with pytest.raises(NetworkValidationError) as info:
        net.initialize(value)
    message = str(info.value)
    assert f'with {value!r}' in message and what in message
    assert 'Output_projection.' in message


def test_initialize_refuses_nan_in_a_dict_naming_the_parameter():
    net = _net()
    before = net.get('parameters').copy()
    with pytest.raises(
        NetworkValidationError, match=r'Output_projection\.bias with nan'
    ):
        net.initialize({'default': 0.1, 'Output_projection': {'bias': math.nan}})
    with pytest.raises(NetworkValidationError, match=r'Output_projection\.W with inf'):
        net.initialize(default=0.1, Output_projection={'W': math.inf})
    # nothing non-finite reached the parameters
    assert np.isfinite(net.get('parameters')).all()
    assert before.shape == net.get('parameters').shape


class _OneNan(Initializer):
    """A user's initializer that puts one NaN among good values."""

    def __call__(self, shape):
        values = np.ones(shape)
        values.flat[values.size - 1] = math.nan
        return values


def test_initialize_refuses_one_nan_from_a_custom_initializer():
    net = _net()
    with pytest.raises(NetworkValidationError) as info:
        net.initialize(_OneNan())
    message = str(info.value)
    assert '_OneNan' in message and 'NaN' in message
    assert 'index (1, 1)' in message or 'index (1,)' in message


def test_initialize_accepts_the_largest_float32_and_finite_values():
    net = _net()
    net.initialize(F32_MAX)
    assert (net.get('parameters') == np.float32(F32_MAX)).all()
    net.initialize(-F32_MAX)
    net.initialize(0.1)
    assert np.allclose(net.get('parameters'), 0.1)


# ---------------------------------------------------- provide_external_data ---


def _batch(**changes):
    x = np.arange(12, dtype=np.float64).reshape(1, 6, 2)
    for index, value in changes.get('x', {}).items():
        x[index] = value
    return {'default': x, 'targets': np.zeros((1, 6, 1))}


@pytest.mark.parametrize(
    'value, what',
    [
        (math.nan, 'NaN'),
        (math.inf, 'an infinite value'),
        (-math.inf, 'an infinite value'),
        (1e39, 'beyond the float32 range'),
        (-3.5e38, 'beyond the float32 range'),
    ],
)
def test_provide_external_data_refuses_one_bad_value_among_good_ones(value, what):
    net = _net()
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data(_batch(x={(0, 4, 1): value}))
    message = str(info.value)
    assert "Input 'default'" in message
    assert what in message
    assert 'index (0, 4, 1)' in message
    assert repr(value) in message
    assert 'check_finite=False' in message


def test_the_first_bad_position_is_named():
    net = _net()
    batch = _batch(x={(0, 5, 0): math.nan, (0, 2, 1): math.inf})
    with pytest.raises(NetworkValidationError, match=r'index \(0, 2, 1\): inf'):
        net.provide_external_data(batch)


def test_values_float32_can_hold_are_accepted():
    net = _net()
    batch = _batch(x={(0, 0, 0): F32_MAX, (0, 1, 0): -F32_MAX})
    net.provide_external_data(batch)
    stored = net.buffer.Input.outputs.default
    assert stored[0, 0, 0] == np.float32(F32_MAX)
    # integers and bools are always representable
    net.provide_external_data(
        {'default': np.full((1, 2, 2), 2**62), 'targets': np.zeros((1, 2, 1), bool)}
    )


def test_check_finite_false_skips_the_check_and_non_bools_are_refused():
    net = _net()
    net.provide_external_data(_batch(x={(0, 0, 0): math.nan}), check_finite=False)
    assert np.isnan(net.buffer.Input.outputs.default[0, 0, 0])
    with pytest.raises(NetworkValidationError, match='check_finite must be a bool'):
        net.provide_external_data(_batch(), check_finite='no')


def test_the_targets_are_checked_too():
    net = _net()
    batch = _batch()
    batch['targets'] = batch['targets'].copy()
    batch['targets'][0, 3, 0] = math.nan
    with pytest.raises(NetworkValidationError, match="Input 'targets'"):
        net.provide_external_data(batch)


def test_find_unrepresentable_edges():
    assert find_unrepresentable(np.zeros(0), np.float32) is None
    assert find_unrepresentable(np.array([F32_MAX, -F32_MAX]), np.float32) is None
    assert find_unrepresentable(np.array([1e39]), np.float64) is None
    index, value, what = find_unrepresentable(np.array([1.0, 1e39, 2.0]), np.float32)
    assert (index, value) == ((1,), 1e39) and 'float32' in what
    index, value, what = find_unrepresentable(np.array([[1.0], [-np.inf]]), np.float64)
    assert (index, what) == ((1, 0), 'an infinite value')
    assert find_unrepresentable(np.array([70000]), np.float16)[0] == (0,)
    assert find_unrepresentable(np.array([True, False]), np.float16) is None


def test_in_a_users_own_loop_in_a_fresh_process(tmp_path):
    code = textwrap.dedent(
        """
        import numpy as np
        import brainstorm as bs
        inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
        net = bs.Network.from_layer(inp >> out)
        net.initialize(bs.initializers.Gaussian(0.1), seed=1)
        x = np.ones((1, 4, 2))
        x[0, 2, 0] = 1e300  # float64, beyond float32
        try:
            net.provide_external_data({'default': x, 'targets': np.zeros((1, 4, 1))})
            net.forward_pass()
            print('NO ERROR', net.get_loss_values())
        except bs.utils.NetworkValidationError as err:
            print('REFUSED', err)
        """
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    result = subprocess.run(
        [sys.executable, '-c', code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('REFUSED'), result.stdout
    assert 'index (0, 2, 0): 1e+300' in result.stdout
