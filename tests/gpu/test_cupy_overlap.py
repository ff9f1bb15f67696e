"""GPU results of the cupy backend's overlapped cooperative schedule (TileConfig(overlap=True),
codegen/sm90_overlap.py) against evt_core.interpret, on every epilogue kind of
tests/cupy/overlap_kinds.py (the CPU checks of the same kinds: tests/cupy/test_sm90_overlap.py).

4100 x 2056 is 33 x 17 = 561 tiles of 128 x 128, four or five per CTA on 132 SMs, so every CTA
runs the first-tile path, the pieces beside a next tile's k-blocks and the last tile's pieces
alone; K = 40 is one k-block (fewer k-blocks than pieces), 200 a few, 1000 more than the ring.
Run with EVT_POISON=1: an element a piece forgets to write is NaN."""
import numpy as np
import pytest

import evt_core
from evt_core.dtypes import DTYPES

from tests.cupy.overlap_kinds import KINDS, example
from tests.gpu import cupy_gpu

pytestmark = pytest.mark.gpu
cp = cupy_gpu.require()     # (before the import below: without cupy this module is skipped here)

from tests.gpu.test_cupy import check  # noqa: E402  (its tolerances, one definition)


def _overlap_tile():
    from evt_backends.cupy.codegen.plan import TileConfig
    return TileConfig(128, 128, 64, stages=6, overlap=True)


def _problem(name, L, M, N, K, dt="float16", seed=0):
    """(tree, A, B, inputs): small-integer A and B (the GEMM exact in fp32), the kind's inputs."""
    rng = np.random.default_rng(seed)
    inputs, outputs = example(name, L, M, N, dt, rng)
    mn = (L, M, N) if L > 1 else (M, N)
    tree = evt_core.trace(KINDS[name], {"accum": np.empty(mn, np.float32), **inputs, **outputs})
    ab = lambda shape: (rng.integers(-2, 3, shape)).astype(np.float32).astype(DTYPES[dt])  # noqa: E731
    A = ab((L, M, K) if L > 1 else (M, K))
    B = ab((L, K, N) if L > 1 else (K, N))
    return tree, A, B, inputs


def _compile(tree, **opts):
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False, tile=_overlap_tile(), **opts)
    return kern


def _bits(x):
    """The bytes of an output (0-d ones included: a scalar reduction)."""
    return np.ascontiguousarray(cp.asnumpy(x)).reshape(-1).view(np.uint8)


def _ran_overlapped(kern):
    cfg = kern.run.last.cfg
    assert cfg.overlap and cfg.label().endswith("/ov"), f"the overlapped kernel did not run: {cfg.label()}"
    assert not kern.run.watchdog_fired()


@pytest.mark.parametrize("K", [40, 200, 1000])
@pytest.mark.parametrize("name", sorted(KINDS))
def test_every_kind_many_tiles_per_cta(name, K):
    """Three calls against one reference: a ring wait passing on an older phase shows as a
    call that reads another tile's (M, N) input, which one call may miss."""
    tree, A, B, inputs = _problem(name, 1, 4100, 2056, K, seed=K)
    kern = _compile(tree)
    ref = evt_core.interpret(tree, A, B, **inputs)
    for _ in range(3):
        check(kern(A, B, **inputs), ref, K)
        _ran_overlapped(kern)


@pytest.mark.parametrize("name", ["gelu_backward", "ln_backward", "reductions", "ffn_forward"])
def test_batched_and_partial_tiles(name):
    tree, A, B, inputs = _problem(name, 3, 1500, 1032, 200, seed=3)
    kern = _compile(tree)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 200)
    _ran_overlapped(kern)


@pytest.mark.parametrize("dt", ["bfloat16"])
@pytest.mark.parametrize("name", ["gelu_backward", "ffn_forward"])
def test_bf16(name, dt):
    tree, A, B, inputs = _problem(name, 1, 2000, 1032, 200, dt=dt, seed=5)
    kern = _compile(tree)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 200)
    _ran_overlapped(kern)


@pytest.mark.parametrize("name", ["gelu_backward", "reductions"])
def test_deterministic_is_bit_identical(name):
    tree, A, B, inputs = _problem(name, 1, 4100, 2056, 200, seed=7)
    kern = _compile(tree, deterministic=True)
    first = kern(A, B, **inputs)
    check(first, evt_core.interpret(tree, A, B, **inputs), 200)
    again = kern(A, B, **inputs)
    for k in first:
        assert np.array_equal(_bits(first[k]), _bits(again[k])), k
    _ran_overlapped(kern)


def test_refused_kind_runs_cooperative_and_says_why():
    """aux_ring=False cannot overlap (the next tile's loads would wait for this epilogue): the
    forced overlapped tile runs cooperative, correct, with the reason in the fast-path report."""
    tree, A, B, inputs = _problem("gelu_backward", 1, 2000, 1032, 200, seed=9)
    kern = _compile(tree, aux_ring=False)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 200)
    assert not kern.run.last.cfg.overlap
    assert "overlap=True not taken" in kern.stages["fast_paths"], kern.stages["fast_paths"]
    assert not kern.run.watchdog_fired()
