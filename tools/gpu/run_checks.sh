#!/usr/bin/env bash
# The GPU checks of PyCudaHandler, as one command for a machine with an
# NVIDIA GPU, the CUDA toolkit (nvcc) and no network (docs/gpu.rst,
# "Checking a GPU machine").
#
# Usage, from the repository root:
#
#     OUT=results bash tools/gpu/run_checks.sh [STAGE ...]
#
# Stages, in this order (default: all but suite):
#   env       GPU, driver, CUDA, Python and package versions
#   pycuda    install PyCUDA's dependencies from .whl/ (wheels carried from a
#             machine with a network: pytools, platformdirs, mako, siphash24,
#             and a PyCUDA wheel or source archive); build PyCUDA from the
#             archive if no wheel is there (the wheel is left in $OUT)
#   gpu       every test marked gpu (tests/handlers/test_pycuda_handler.py:
#             the op table, every layer of the registry, training runs
#             against NumPy float64) on the GPU
#   examples  every example with --gpu, on its offline data, a few epochs
#   bench     benchmarks/bench_step.py --device gpu next to PyTorch CUDA
#   profile   where the host time of a GPU step goes (tools/gpu/profile_step.py)
#   smoke     bench with one round of five steps and one short example:
#             a cheap check that those two paths work at all
#   suite     the whole suite (not only the gpu tests) on all cores
# Each stage has a time limit, writes its log to $LOGS and prints its
# tail; $OUT/logs.tgz holds the logs of the stages done so far.
set -u
OUT=$(realpath -m "${OUT:-$PWD/gpu_out}")
LOGS=${LOGS:-/tmp/gpu_logs}  # packed into $OUT/logs.tgz after every stage
mkdir -p "$LOGS"
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
STAGES=" ${*:-env pycuda gpu examples bench} "
T0=$(date +%s)
ROOT=$PWD

stamp() {
    tar czf "$OUT/logs.tgz.part" -C "$LOGS" . && mv "$OUT/logs.tgz.part" "$OUT/logs.tgz"
    echo "=== [$(($(date +%s) - T0)) s] $*"
}
want() { [[ "$STAGES" == *" $1 "* ]]; }
# run LIMIT LOG COMMAND...: the command under a time limit, logged in full
run() {
    local limit=$1 log=$2
    shift 2
    timeout "$limit" "$@" >"$LOGS/$log" 2>&1
    local rc=$?
    echo "--- rc $rc: $*"
    tail -n "${TAIL:-25}" "$LOGS/$log"
    return $rc
}

if want env; then
    stamp env
    {
        nvidia-smi
        nvcc --version | tail -2
        $PY -VV
        $PY -c 'import numpy, h5py; print("numpy", numpy.__version__, "h5py", h5py.__version__)'
        nproc
    } 2>&1 | tee "$LOGS/env.txt"
fi

export PYTHONPATH=/tmp/site:$ROOT
if want pycuda; then
    stamp pycuda
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl
    if ! $PY -c 'import pycuda.driver' 2>/dev/null; then
        rm -rf /tmp/pycuda-src && mkdir /tmp/pycuda-src
        tar xzf .whl/pycuda-*.tar.gz -C /tmp/pycuda-src --strip-components 1
        # no debug symbols: the wheel stays small enough to carry back
        CFLAGS=-g0 LDFLAGS=-s run 300 pycuda_build.log \
            $PY tools/gpu/build_pycuda.py /tmp/pycuda-src "$OUT" --no-cuda-enable-curand
        $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$OUT"/pycuda-*.whl
    fi
    $PY -c 'import pycuda, pycuda.driver as d; d.init(); print("PyCUDA", pycuda.VERSION_TEXT, "CUDA", d.get_version(), "driver", d.get_driver_version(), d.Device(0).name())' || exit 1
fi

if want gpu; then
    stamp gpu tests
    TAIL=60 run "${GPU_LIMIT:-420}" gpu_tests.log $PY -m pytest -p no:cacheprovider -m gpu -n 8 -q -rfE \
        --junitxml="$LOGS/gpu_tests.xml" tests/handlers/test_pycuda_handler.py
fi

if want smoke; then
    stamp smoke
    run 120 smoke_bench.txt $PY benchmarks/bench_step.py --device gpu --rounds 1 --repeats 5
    (cd /tmp && TAIL=8 run 120 smoke_example.log $PY "$ROOT/examples/mnist_pi.py" --gpu --epochs 1 --limit 300 --save /tmp/smoke.hdf5)
fi

if want profile; then
    stamp profile
    for workload in lstm cnn mlp; do
        TAIL=45 run 120 "profile_$workload.txt" $PY tools/gpu/profile_step.py $workload 5
    done
fi

if want examples; then
    stamp examples
    mkdir -p /tmp/examples
    for example in mnist_pi cifar10_cnn hutter_lstm custom_layer; do
        stamp "example $example"
        (cd /tmp/examples && TAIL=6 run 150 "example_$example.log" \
            $PY "$ROOT/examples/$example.py" --gpu --epochs 5 --limit 600)
    done
fi

if want bench; then
    stamp bench
    TAIL=40 run 400 bench_gpu.txt $PY benchmarks/bench_step.py --device gpu --compare-torch \
        --rounds 3 --layers
fi

if want suite; then
    stamp suite
    TAIL=40 run 400 suite.log $PY -m pytest -p no:cacheprovider -n "$(nproc)" -q -rfE tests
fi
stamp done
