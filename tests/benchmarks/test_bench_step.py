"""benchmarks/bench_step.py: the FLOP count of each workload, the physical
limit computed from measured rates, the choice of PyTorch's faster layout,
the CPU model in the header, and one run of the script."""

import importlib.util
import math
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / 'benchmarks' / 'bench_step.py'


def load_script():
    spec = importlib.util.spec_from_file_location('bench_step_under_test', SCRIPT)
    module = importlib.util.module_from_spec(spec)
    # dataclasses look the module up while the class is created
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


bench = load_script()


def torch_available() -> bool:
    return importlib.util.find_spec('torch') is not None


def by_phase(products) -> dict:
    totals = {'forward': 0, 'backward data': 0, 'backward weights': 0}
    for product in products:
        totals[product.phase] += product.flops
    return totals


# ---------------------------------------------------------- FLOP counts ---


def test_mlp_flops_per_pass():
    fc = 784 * 1200 + 1200 * 1200 + 1200 * 10
    totals = by_phase(bench.workload_products('mlp'))
    assert totals == {
        'forward': 2 * 100 * fc,
        # the first layer is fed by the data: no input deltas
        'backward data': 2 * 100 * (1200 * 1200 + 1200 * 10),
        'backward weights': 2 * 100 * fc,
    }
    assert sum(totals.values()) == 1_247_520_000


def test_lstm_flops_per_pass():
    t, b = 50, 32
    inputs = 2 * t * b * 205 * 4 * 512  # all gates, all time steps
    recurrent = t * 2 * b * 512 * 4 * 512  # one product per time step
    output = 2 * t * b * 512 * 205
    totals = by_phase(bench.workload_products('lstm'))
    assert totals == {
        'forward': inputs + recurrent + output,
        'backward data': recurrent + output,  # no deltas for the data
        'backward weights': inputs + recurrent + output,
    }
    assert sum(totals.values()) == 13_760_921_600


def test_cnn_flops_per_pass():
    def conv(h, w, c, f):  # 5x5 filters, padding 2: output h x w
        return 2 * 100 * h * w * f * 5 * 5 * c

    # 32x32x3 -> conv 32 -> pool 3/2 -> 15x15x32 -> conv 32 -> pool -> 7x7x32
    # -> conv 64 -> pool -> 3x3x64 = 576 -> FC 64 -> FC 10
    convs = conv(32, 32, 3, 32) + conv(15, 15, 32, 32) + conv(7, 7, 32, 64)
    dense = 2 * 100 * (576 * 64 + 64 * 10)
    totals = by_phase(bench.workload_products('cnn'))
    assert totals == {
        'forward': convs + dense,
        'backward data': convs - conv(32, 32, 3, 32) + dense,
        'backward weights': convs + dense,
    }
    assert sum(totals.values()) == 5_966_822_400


def test_lstm_recurrent_product_counts_every_time_step():
    recurrent = [
        p for p in bench.workload_products('lstm') if p.layer == 'Lstm (recurrent)'
    ]
    counts = {p.phase: (p.count, p.operation.shape) for p in recurrent}
    assert counts == {
        'forward': (50, (32, 512, 2048)),
        'backward data': (50, (32, 2048, 512)),
        # one product over all time steps: K = T * B
        'backward weights': (1, (2048, 1600, 512)),
    }


def test_unknown_workload_is_refused():
    with pytest.raises(ValueError, match="unknown workload 'rnn'"):
        bench.workload_products('rnn')


@pytest.mark.parametrize('workload', bench.WORKLOADS)
def test_products_have_the_shapes_of_the_benchmark_networks(workload):
    net, _, _ = bench.build_brainstorm(workload, 'cpu', 'numpy')
    forward = [p for p in bench.workload_products(workload) if p.phase == 'forward']
    checked = set()
    for product in forward:
        name = product.layer.split(' (')[0]
        params = net.buffer[name].parameters
        if product.operation.kind == 'conv':
            n, h, w, c, f, kernel, pad = product.operation.shape
            assert params['W'].shape == (f, kernel, kernel, c)
            out = bench.conv_output_size(h, kernel, pad)
            assert net.buffer[name].outputs.default.shape[2:] == (out, out, f)
            assert net.buffer[name].inputs.default.shape[2:] == (h, w, c)
        elif product.layer == 'Lstm (inputs)':
            _, n_in, n_out = product.operation.shape
            assert sum(params[f'W{g}'].shape[0] for g in 'zifo') == n_out
            assert {params[f'W{g}'].shape[1] for g in 'zifo'} == {n_in}
        elif product.layer == 'Lstm (recurrent)':
            _, n_in, n_out = product.operation.shape
            assert sum(params[f'R{g}'].shape[0] for g in 'zifo') == n_out
            assert {params[f'R{g}'].shape[1] for g in 'zifo'} == {n_in}
        else:
            _, n_in, n_out = product.operation.shape
            assert params['W'].shape == (n_out, n_in)
        checked.add(name)
    # every layer with weights has its products
    weighted = {
        name
        for name in net.layers
        if net.buffer[name].parameters is not None and len(net.buffer[name].parameters)
    }
    assert checked == weighted


# ------------------------------------------------------------- the limit ---


def test_limit_is_flops_over_the_best_rate_of_each_shape():
    gemm = bench.Operation('gemm', (10, 20, 30))
    conv_back = bench.Operation('conv', (2, 6, 6, 3, 4, 3, 1), 'backward')
    products = [
        bench.Product('a', 'forward', gemm, count=7),
        bench.Product('b', 'backward data', conv_back),
        bench.Product('b', 'backward weights', conv_back),
    ]
    seconds = {
        gemm.key: {'numpy.matmul': 2e-3},
        conv_back.key: {'handler': 5e-3, 'torch channels_last': 3e-3},
    }
    # 7 calls at 2 ms; the two backward passes are one call, at the faster
    # source's 3 ms
    assert bench.limit_seconds(products, seconds) == pytest.approx(7 * 2e-3 + 3e-3)
    # the same as FLOPs / rate, summed
    gemm_rate = 2 * 10 * 20 * 30 / 2e-3
    conv_flops = 2 * 2 * 6 * 6 * 4 * 9 * 3  # one pass, output 6 x 6
    conv_rate = 2 * conv_flops / 3e-3
    expected = 7 * 2 * 10 * 20 * 30 / gemm_rate + 2 * conv_flops / conv_rate
    assert bench.limit_seconds(products, seconds) == pytest.approx(expected)


def test_conv_operation_flops_cover_its_passes():
    shape = (100, 15, 15, 32, 32, 5, 2)
    one_pass = 2 * 100 * 15 * 15 * 32 * 25 * 32
    assert bench.Operation('conv', shape, 'forward').flops == one_pass
    assert bench.Operation('conv', shape, 'backward').flops == 2 * one_pass
    assert bench.Operation('conv', shape, 'backward weights').flops == one_pass
    # the first layer's backward call computes no input deltas
    first = bench.workload_products('cnn')[:2]
    assert [p.phase for p in first] == ['forward', 'backward weights']
    assert first[1].operation.group == 'backward weights'


def test_limit_without_a_measured_rate_names_the_shape():
    gemm = bench.Operation('gemm', (1, 2, 3))
    with pytest.raises(KeyError, match=r'gemm 1x2 \. 2x3'):
        bench.limit_seconds([bench.Product('a', 'forward', gemm)], {})


def test_every_operation_of_the_workloads_is_listed_once():
    operations = bench.step_operations(bench.WORKLOADS)
    keys = [op.key for op in operations]
    assert len(keys) == len(set(keys))
    for workload in bench.WORKLOADS:
        for product in bench.workload_products(workload):
            assert product.operation.key in keys
    # the MLP's hidden layer runs forward and backward data at one shape
    assert 'gemm 100x1200 . 1200x1200' in keys


def tiny_args(**changes):
    args = {'device': 'cpu', 'workloads': ['mlp'], 'handler': 'numpy'}
    args.update(changes)
    return SimpleNamespace(shapes=False, **args)


def test_rate_calls_run_on_the_handlers(monkeypatch):
    monkeypatch.setattr(bench, 'MIN_RATE_SECONDS', 0.0)
    gemm = bench.Operation('gemm', (4, 5, 6))
    assert 0 < bench.time_calls(bench.gemm_call(gemm)) < 10
    handlers = ['numpy']
    from brainstorm.handlers.onednn import onednn_available

    if onednn_available()[0]:
        handlers.append('onednn')
    for name in handlers:
        handler = bench.make_handler('cpu', name)
        for group in ('forward', 'backward', 'backward weights'):
            operation = bench.Operation('conv', (2, 6, 6, 3, 4, 3, 1), group)
            seconds = bench.time_calls(bench.handler_conv_call(handler, operation))
            assert 0 < seconds < 10


def test_handler_products_compute_the_product(monkeypatch):
    from brainstorm.handlers.onednn import onednn_available

    monkeypatch.setattr(bench, 'MIN_RATE_SECONDS', 0.0)
    names = ['numpy'] + (['onednn'] if onednn_available()[0] else [])
    operation = bench.Operation('gemm', (32, 64, 48))
    a, b, expected = bench.gemm_operands(operation)
    np.matmul(a, b, out=expected)
    for name in names:
        handler = bench.make_handler('cpu', name)
        out = np.zeros_like(expected)
        handler.dot_mm(a, b, out)
        np.testing.assert_allclose(out, expected, rtol=1e-5)
        assert bench.handler_gemm_seconds(handler, operation) > 0


@pytest.mark.skipif(not torch_available(), reason='needs PyTorch')
def test_torch_conv_calls_run(monkeypatch):
    monkeypatch.setattr(bench, 'MIN_RATE_SECONDS', 0.0)
    for group in ('forward', 'backward', 'backward weights'):
        operation = bench.Operation('conv', (2, 6, 6, 3, 4, 3, 1), group)
        call = bench.torch_conv_call(operation)
        assert 0 < bench.time_calls(call) < 10
    backward = bench.torch_conv_call(
        bench.Operation('conv', (2, 6, 6, 3, 4, 3, 1), 'backward weights')
    )()
    dx, dw, db = backward
    assert dx is None and tuple(dw.shape) == (4, 3, 3, 3) and tuple(db.shape) == (4,)


def test_limits_are_not_measured_on_the_gpu(capsys, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError('measured rates for a GPU run')

    monkeypatch.setattr(bench, 'measure_limits', fail)
    bench.report_limits(tiny_args(device='gpu'), {}, True, True)
    assert 'CPU only' in capsys.readouterr().out


# ------------------------------------------------- PyTorch's faster layout ---


def test_torch_variants():
    assert bench.torch_variants('cnn', 'cpu') == ['torch', 'torch-channels_last']
    assert bench.torch_variants('mlp', 'cpu') == ['torch']
    assert bench.torch_variants('lstm', 'cpu') == ['torch']
    # the GPU comparison stays cuDNN on / off
    for workload in bench.WORKLOADS:
        assert bench.torch_variants(workload, 'gpu') == ['torch', 'torch-nocudnn']


def test_faster_variant():
    assert bench.faster_variant({'torch': 0.04, 'torch-channels_last': 0.03}) == (
        'torch-channels_last'
    )
    assert bench.faster_variant({'torch': 0.03, 'torch-channels_last': 0.04}) == (
        'torch'
    )
    # a tie keeps PyTorch's default, listed first
    assert bench.faster_variant({'torch': 0.03, 'torch-channels_last': 0.03}) == (
        'torch'
    )
    with pytest.raises(ValueError, match='no PyTorch measurements'):
        bench.faster_variant({})


@pytest.mark.skipif(not torch_available(), reason='needs PyTorch')
def test_torch_cnn_in_channels_last():
    import torch

    nchw = torch.contiguous_format
    cl = torch.channels_last
    for channels_last, layout in ((False, nchw), (True, cl)):
        net, x, _ = bench.build_torch('cnn', channels_last)
        assert x.is_contiguous(memory_format=layout)
        convs = [m for m in net if isinstance(m, torch.nn.Conv2d)]
        assert len(convs) == 3
        for conv in convs:
            assert conv.weight.is_contiguous(memory_format=layout)
        assert net(x[:2]).shape == (2, 10)
    # the NCHW images are not channels_last (3 channels: the formats differ)
    _, x, _ = bench.build_torch('cnn')
    assert not x.is_contiguous(memory_format=cl)


@pytest.mark.skipif(not torch_available(), reason='needs PyTorch')
@pytest.mark.parametrize('workload', bench.WORKLOADS)
def test_products_have_the_shapes_of_the_torch_networks(workload):
    import torch

    net, x, _ = bench.build_torch(workload)
    weights = [
        tuple(p.shape) for name, p in net.named_parameters() if 'bias' not in name
    ]
    expected = []
    for product in bench.workload_products(workload):
        if product.phase != 'forward':
            continue
        if product.operation.kind == 'conv':
            _, _, _, c, f, kernel, _ = product.operation.shape
            expected.append((f, c, kernel, kernel))
        else:
            _, n_in, n_out = product.operation.shape
            expected.append((n_out, n_in))  # nn.LSTM: 4 gates stacked
    assert weights == expected
    if workload == 'cnn':  # the images have the products' size
        assert tuple(x.shape[1:]) == (3, 32, 32)
        assert isinstance(net[-1], torch.nn.Linear)


def test_rounds_alternate_brainstorm_and_both_torch_layouts(monkeypatch):
    calls = []

    def fake_measure(framework, workload, *args):
        calls.append((framework, workload))
        return {'median': 0.01, 'peak_rss': 1}

    monkeypatch.setattr(bench, 'measure', fake_measure)
    args = SimpleNamespace(
        rounds=2,
        workloads=['mlp', 'cnn'],
        repeats=1,
        layers=False,
        device='cpu',
        handler='numpy',
    )
    results = bench.run_rounds(args, with_torch=True)
    one_round = [
        ('brainstorm', 'mlp'),
        ('torch', 'mlp'),
        ('brainstorm', 'cnn'),
        ('torch', 'cnn'),
        ('torch-channels_last', 'cnn'),
    ]
    assert calls == one_round * 2
    assert len(results['torch-channels_last', 'cnn']) == 2
    calls.clear()
    args.device = 'gpu'
    bench.run_rounds(args, with_torch=True)
    assert ('torch-nocudnn', 'cnn') in calls
    assert ('torch-channels_last', 'cnn') not in calls
    calls.clear()
    bench.run_rounds(args, with_torch=False)
    assert {framework for framework, _ in calls} == {'brainstorm'}


def runs(*medians, rss=100 * 2**20):
    return [{'median': m, 'peak_rss': rss, 'cpu_pressure': None} for m in medians]


def fake_results():
    return {
        ('brainstorm', 'mlp'): runs(0.007),
        ('torch', 'mlp'): runs(0.010),
        ('brainstorm', 'cnn'): runs(0.060, 0.050, 0.070),
        # medians over rounds: NCHW 0.040, channels_last 0.036, although
        # NCHW had the single fastest round
        ('torch', 'cnn'): runs(0.040, 0.020, 0.050, rss=200 * 2**20),
        ('torch-channels_last', 'cnn'): runs(0.035, 0.045, 0.036, rss=400 * 2**20),
    }


def test_the_ratio_uses_the_layout_with_the_smaller_median_over_rounds():
    results = fake_results()
    assert bench.used_torch_variant(results, 'cnn') == 'torch-channels_last'
    assert bench.used_torch_variant(results, 'mlp') == 'torch'
    results['torch', 'cnn'] = runs(0.030, 0.040, 0.031)
    assert bench.used_torch_variant(results, 'cnn') == 'torch'


def test_cpu_table_shows_both_layouts_and_marks_the_one_used(capsys):
    bench.print_cpu_torch_table(fake_results(), ['mlp', 'cnn'])
    lines = capsys.readouterr().out.splitlines()
    cells = [line.split() for line in lines]
    assert cells[1][:3] == ['mlp', '-', '7.0']
    assert cells[1][-2:] == ['0.70', '1.00']
    # the row used: brainstorm 60 ms against channels_last 36 ms
    used = next(c for c in cells if c[:3] == ['cnn', 'channels_last', '(used)'])
    assert used[3] == '60.0' and '36.0' in used
    assert used[-2:] == [f'{0.060 / 0.036:.2f}', '0.25']
    # the other layout: its figures, its ratios in parentheses
    other = next(c for c in cells if c[:2] == ['cnn', 'NCHW'])
    assert other[2] == '40.0'
    assert other[-2:] == ['(1.50)', '(0.50)']
    assert 'cnn: the ratio uses PyTorch channels_last, the faster layout' in lines[-1]


def test_limits_table(capsys):
    results = fake_results()
    products = bench.workload_products('cnn')
    # every operation's fastest call takes 1 ms: the limit is 1 ms per call
    seconds = {p.operation.key: {'x': 1e-3} for p in products}
    calls = sum(
        p.count * (0.5 if p.operation.group == 'backward' else 1) for p in products
    )
    bench.print_limits(results, ['cnn'], seconds, with_torch=True)
    out = capsys.readouterr().out
    row = next(
        line.split() for line in out.splitlines() if line.lstrip().startswith('cnn')
    )
    limit_ms = calls * 1.0
    assert row == [
        'cnn',
        '5.97',
        f'{limit_ms:.1f}',
        f'{60.0 / limit_ms:.2f}',
        f'{36.0 / limit_ms:.2f}',  # PyTorch in the layout the ratio uses
    ]


# ---------------------------------------------------------------- header ---


def test_cpu_model_from_cpuinfo(tmp_path):
    cpuinfo = tmp_path / 'cpuinfo'
    cpuinfo.write_text(
        'processor\t: 0\nvendor_id\t: X\nmodel name\t: Some CPU @ 2.0GHz\n'
        'processor\t: 1\nmodel name\t: Some CPU @ 2.0GHz\n'
    )
    assert bench.cpu_model(str(cpuinfo)) == 'Some CPU @ 2.0GHz'


def test_cpu_model_falls_back_to_platform(tmp_path, monkeypatch):
    monkeypatch.setattr(bench.platform, 'processor', lambda: 'arm64')
    assert bench.cpu_model(str(tmp_path / 'missing')) == 'arm64'
    no_model = tmp_path / 'cpuinfo'
    no_model.write_text('processor\t: 0\nHardware\t: Some board\n')
    assert bench.cpu_model(str(no_model)) == 'arm64'
    monkeypatch.setattr(bench.platform, 'processor', lambda: '')
    assert bench.cpu_model(str(no_model)) == '?'


def test_header_names_the_cpu_model(capsys):
    bench.print_header(None)
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith(f'machine: {bench.cpu_model()}, ')


# ------------------------------------------------------------ whole run ---


@pytest.mark.slow
def test_script_runs_with_the_smallest_settings():
    command = [sys.executable, str(SCRIPT), '--workloads', 'mlp', '--repeats', '1']
    if torch_available():
        command.append('--compare-torch')
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert completed.returncode == 0, completed.stderr
    out = completed.stdout
    assert out.startswith(f'machine: {bench.cpu_model()}, ')
    assert 'brainstorm handler: ' in out
    row = next(
        line.split() for line in out.splitlines() if line.split()[:2] == ['mlp', '1.25']
    )
    limit, over_limit = float(row[2]), float(row[3])
    assert limit > 0 and math.isfinite(over_limit) and over_limit > 0
    if torch_available():
        assert len(row) == 5 and float(row[4]) > 0
        assert any(line.split()[:2] == ['mlp', '-'] for line in out.splitlines())


def test_limits_flag():
    _, args = bench.parse_arguments([])
    assert args.limits and not args.shapes
    _, args = bench.parse_arguments(['--no-limits', '--shapes'])
    assert not args.limits and args.shapes


def test_numbers_are_float32_products():
    # the GEMM rate is measured on contiguous float32 operands
    call = bench.gemm_call(bench.Operation('gemm', (3, 4, 5)))
    result = call()
    assert result.dtype == np.float32 and result.shape == (3, 5)
    assert result.flags.c_contiguous


def fake_measure(
    framework,
    workload,
    repeats,
    per_layer,
    device='cpu',
    handler='x',
    workloads=bench.WORKLOADS,
):
    """measure() without subprocesses: every step 10 ms (brainstorm 20 ms,
    PyTorch channels_last 5 ms), every rate call 1 ms."""
    if workload == bench.RATES:
        operations = bench.step_operations(workloads)
        source = 'handler' if framework == 'brainstorm' else 'torch channels_last'
        seconds = {
            op.key: {source: 1e-3}
            for op in operations
            if framework == 'brainstorm' or op.kind == 'conv'
        }
        return {'seconds': seconds, 'cpu_pressure': 0.0}
    median = {'brainstorm': 0.02, 'torch-channels_last': 0.005}.get(framework, 0.01)
    return {
        'median': median,
        'times': [median],
        'peak_rss': 2**20,
        'handler': 'FakeHandler',
        'cpu_pressure': 0.0,
    }


def driver_output(monkeypatch, capsys, argv):
    monkeypatch.setattr(bench, 'measure', fake_measure)
    monkeypatch.setattr(bench, 'torch_version', lambda: '9.9, 2 threads')
    monkeypatch.setattr(bench, 'print_gpu_header', lambda: print('GPU: fake'))
    assert bench.main(argv) == 0
    return capsys.readouterr().out


def test_driver_on_the_cpu(monkeypatch, capsys):
    out = driver_output(
        monkeypatch,
        capsys,
        ['--compare-torch', '--workloads', 'mlp', 'cnn', '--shapes'],
    )
    lines = out.splitlines()
    assert 'brainstorm handler: FakeHandler' in lines
    cnn_used = next(line.split() for line in lines if 'channels_last (used)' in line)
    assert cnn_used[-2:] == ['4.00', '1.00']  # 20 ms / 5 ms
    # the limits: every call 1 ms
    mlp_calls = len(bench.workload_products('mlp'))
    mlp_row = next(
        line.split() for line in lines if line.split()[:2] == ['mlp', '1.25']
    )
    assert mlp_row[2:] == [
        f'{mlp_calls:.1f}',
        f'{20 / mlp_calls:.2f}',
        f'{10 / mlp_calls:.2f}',
    ]
    cnn_row = next(
        line.split() for line in lines if line.split()[:2] == ['cnn', '5.97']
    )
    cnn_calls = len(bench.step_operations(['cnn']))  # one call per shape
    assert cnn_row[2:] == [
        f'{cnn_calls:.1f}',
        f'{20 / cnn_calls:.2f}',
        f'{5 / cnn_calls:.2f}',
    ]
    assert (
        'conv backward 100x15x15x32 * 32x5x5 pad 2: handler 2304, '
        'torch channels_last 2304' in out
    )


def test_driver_on_the_gpu_keeps_the_cudnn_comparison(monkeypatch, capsys):
    out = driver_output(
        monkeypatch,
        capsys,
        ['--device', 'gpu', '--compare-torch', '--workloads', 'cnn'],
    )
    header = next(
        line for line in out.splitlines() if line.lstrip().startswith('workload')
    )
    assert 'torch ms' in header and 'torch-nocudnn ms' in header
    assert 'layout' not in header and 'channels_last' not in out
    assert 'physical limits: measured on the CPU only' in out
    assert 'GPU: fake' in out
