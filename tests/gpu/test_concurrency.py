"""One compiled kernel called from 8 threads x 50 calls, and on two CUDA streams at once (no
host synchronisation between the calls), gives the reference's results on both GPU backends.
The kernel has reductions, so every call writes the kernel's shared workspace: the case the
per-kernel lock and the cross-stream event ordering of backends/gpu/streams.py exist for."""
import os
import threading

import numpy as np
import pytest

import evt_core
from evt_core import ops

pytestmark = pytest.mark.gpu
cp = pytest.importorskip("cupy", reason="cupy is not installed")
M, N, K = 384, 320, 72


def epi(accum, bias):
    y = ops.relu(accum + bias)
    return {"D": y, "S": ops.sum(y, over="M"), "R": ops.amax(accum, over="N")}


def _problem_sets(count):
    rng = np.random.default_rng(7)
    sets = []
    for _ in range(count):
        A = rng.integers(-2, 3, (M, K)).astype(np.float16)
        B = rng.integers(-2, 3, (K, N)).astype(np.float16)
        bias = rng.integers(-3, 4, (N,)).astype(np.float32)
        sets.append((A, B, bias))
    ex = {"accum": np.empty((M, N), np.float32), "bias": sets[0][2], "D": np.empty((M, N), np.float16),
          "S": np.empty((N,), np.float32), "R": np.empty((M,), np.float32)}
    tree = evt_core.trace(epi, ex)
    refs = [evt_core.interpret(tree, A, B, bias=bias) for A, B, bias in sets]
    dev = [(cp.asarray(A), cp.asarray(B), cp.asarray(bias)) for A, B, bias in sets]
    return tree, dev, refs


def _same(got, ref):
    return all(np.array_equal(cp.asnumpy(got[k]).astype(np.float32), np.asarray(ref[k], np.float32)) for k in ref)


def _kernel(backend, tree):
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" or not evt_core.backends().get(backend):
        pytest.skip(f"{backend} unavailable")
    return evt_core.compile(tree, backend=backend)


@pytest.mark.parametrize("backend", ["numba_cuda", "cupy"])
def test_eight_threads(backend):
    tree, dev, refs = _problem_sets(4)
    kernel = _kernel(backend, tree)
    bad, errors = [], []

    def worker(t):
        try:
            with cp.cuda.Stream(non_blocking=True):     # each thread on its own stream
                for i in range(50):
                    j = (t + i) % len(dev)
                    A, B, bias = dev[j]
                    got = kernel(A, B, bias=bias)
                    cp.cuda.get_current_stream().synchronize()
                    if not _same(got, refs[j]):
                        bad.append((t, i))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(timeout=300)
    assert not any(th.is_alive() for th in threads), "a worker did not finish within 300 s"
    assert not errors, errors[:3]
    assert not bad, f"{len(bad)} of 400 calls differed from the reference, first {bad[:5]}"


@pytest.mark.parametrize("backend", ["numba_cuda", "cupy"])
def test_two_streams(backend):
    tree, dev, refs = _problem_sets(2)
    kernel = _kernel(backend, tree)
    streams = [cp.cuda.Stream(non_blocking=True), cp.cuda.Stream(non_blocking=True)]
    results = []
    for i in range(40):                      # alternate streams, no host sync in between
        s = i % 2
        with streams[s]:
            A, B, bias = dev[s]
            results.append((s, kernel(A, B, bias=bias)))
    for st in streams:
        st.synchronize()
    bad = [i for i, (s, got) in enumerate(results) if not _same(got, refs[s])]
    assert not bad, f"calls {bad[:8]} differed from the reference"
