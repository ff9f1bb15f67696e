"""Differential conformance: every available backend against `evt_core.interpret`.

Each example draws a random epilogue from `strategies.epilogues()` (every op, every broadcast
role, transposed inputs and outputs, reductions over every axis set, fp32/fp16/bf16, batched or
not), compiles it once, and checks it at the traced problem and at `EVT_SIZES_PER_TREE` larger
ones with the same roles: M and N around tile edges (16/64/128/256 +- 1), K not a multiple of
the K tile, extents of 1 kept. Outputs are NaN-poisoned (EVT_POISON=1), so an element a kernel
never writes shows as NaN. Inputs are NumPy arrays: every backend copies them to the device and
returns NumPy, which keeps bfloat16 and the comparison in one place.

Comparison, staged: the same output names; then per output dtype, shape, NaN positions and
values, through `strategies.assert_close` with the per-dtype tolerance (toolchain notes 5.1,
K-dependent) plus twice the float64 oracle's running error bound of an fp32 evaluation
(`reference64`): both the backend and the interpreter are such evaluations, so they may each be
that far from the truth. A, B and the aux inputs sit on a small grid, so the GEMM is exact and
comparisons and `where` conditions read exact values; a larger problem whose comparisons become
ambiguous is skipped (and counted with `event`).

GPU backends' cases carry `pytest.mark.gpu`; the numpy backend runs on the CPU. Example counts:
the CPU test takes the profile's (dev 30, ci 60, gpu 300). Each GPU example compiles a new kernel
(5-15 s on an H200 for numba_cuda, measured 2026-11-29), so the GPU test takes
min(profile, EVT_GPU_TREES) trees, each at 1 + EVT_SIZES_PER_TREE problems (default 4): the gpu
profile alone means 300 trees and 1500 checked calls per backend (a long dedicated run);
scripts/gpu_suite.sh runs EVT_GPU_SHARDS shards of EVT_GPU_TREES trees each in parallel
(pytest-xdist) to stay inside its time limit.
"""
import os

import numpy as np
import pytest
from hypothesis import event, given, note, settings
from hypothesis import strategies as st

import evt_core
from evt_core.errors import UnsupportedError

from . import reference64
from .strategies import assert_close, epilogues

CPU_BACKENDS = frozenset({"numpy"})
SIZES_PER_TREE = int(os.environ.get("EVT_SIZES_PER_TREE", "4"))
GPU_TREES = int(os.environ.get("EVT_GPU_TREES", "100000"))
# Shards let pytest-xdist spread the GPU examples (compile-bound) over CPU cores: each shard is
# its own test with its own random examples (not derandomised, or every shard would draw the
# same trees); EVT_GPU_TREES is per shard.
GPU_SHARDS = int(os.environ.get("EVT_GPU_SHARDS", "1"))
# Options for speed, not semantics: cupy's autotuner would build and time every tile config at
# every new shape class; the benchmark checks the autotuned kernels at full size instead.
# fast_math=False: this suite checks exact semantics against a float64 oracle; the approximate
# transcendentals (the cupy default where results are 16-bit) have their own GPU tests with the
# looser bound they need (tests/gpu/test_cupy.py::check_fast). The TMA paths stay at their defaults.
FAST_OPTIONS = {"cupy": {"autotune": False, "fast_math": False}}
# Tile edges of the GPU kernels (16-wide mma fragments, 64/128/256 CTA tiles) and their
# neighbours; K edges for 16/32/64-deep K tiles and a ragged last tile.
EDGE_MN = (2, 3, 15, 17, 33, 63, 64, 65, 127, 128, 129, 255, 257)
EDGE_K = (1, 7, 15, 16, 17, 31, 33, 63, 64, 65, 129)


def _params(gpu):
    """One pytest param per registered backend of the kind, skipped (with the backend's own
    reason) when it is not available here."""
    out = []
    for name, support in sorted(evt_core.backends().items()):
        if (name not in CPU_BACKENDS) != gpu:
            continue
        marks = [pytest.mark.gpu] if gpu else []
        if not support:
            marks.append(pytest.mark.skip(reason=f"backend {name!r} unavailable: {support.reason}"))
        out.append(pytest.param(name, marks=marks, id=name))
    return out or [pytest.param("none", marks=pytest.mark.skip(reason="no backend of this kind registered"))]


def _fast_options(backend):
    """FAST_OPTIONS[backend], keeping only the options the backend still declares (a renamed
    option must not turn every case into an UnsupportedError that the test would skip)."""
    from evt_core.plugin.manager import plugins
    declared = plugins().registry.get(backend).options
    return {k: v for k, v in FAST_OPTIONS.get(backend, {}).items() if k in declared}


@st.composite
def larger_problems(draw, case, count):
    """`count` (L, M, N, K, seed) with the roles of `case`: an extent that was 1 at trace time
    stays 1 (it made an operand a broadcast); the others move to tile edges or anywhere in
    2..300; K is free."""
    L0, M0, N0, _ = case.problem

    def extent(was, edges, hi):
        return 1 if was == 1 else draw(st.one_of(st.sampled_from(edges), st.integers(2, hi)))
    return [(extent(L0, (2, 3), 4) if case.batched else 1, extent(M0, EDGE_MN, 300), extent(N0, EDGE_MN, 300),
             draw(st.one_of(st.sampled_from(EDGE_K), st.integers(1, 130))), draw(st.integers(0, 2 ** 32 - 1)))
            for _ in range(count)]


def record_checks(backend, count):
    """Add `count` checked calls of `backend` to $EVT_COUNT_DIR (one file per process, summed by
    scripts/gpu_suite.sh), so a run reports how many examples it really compared."""
    where = os.environ.get("EVT_COUNT_DIR")
    if where and count:
        with open(os.path.join(where, f"checks-{os.getpid()}.txt"), "a") as f:
            f.write(f"{backend} {count}\n")


def check_conformance(backend, case, problems):
    """Compile `case` for `backend` once; at each problem compare with the interpreter."""
    note(case.note())
    note(f"kernel = evt_core.compile(evt_core.trace(epilogue, examples), backend={backend!r})")
    tree = evt_core.trace(case.fn, case.examples)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("EVT_POISON", "1")
        try:
            kernel = evt_core.compile(tree, backend=backend, **_fast_options(backend))
        except UnsupportedError as e:
            event(f"unsupported by {backend}: {str(e)[:80]}")
            return
        checked = 0
        for i, problem in enumerate(problems):
            L, M, N, K, seed = problem
            A, B, inputs = (case.A, case.B, case.inputs) if i == 0 else case.arrays_at(L, M, N, K, seed=seed)
            where = f" at (L, M, N, K) = {(L, M, N, K)}, seed {seed}"
            oracle = reference64.evaluate(case.spec, A, B, inputs)
            if oracle.ambiguous:
                event("larger problem skipped: a comparison became ambiguous in fp32")
                continue
            want = evt_core.interpret(tree, A, B, **inputs)
            try:
                got = kernel(A, B, **inputs)
            except UnsupportedError as e:
                event(f"call unsupported by {backend}: {str(e)[:80]}")
                continue
            assert sorted(got) == sorted(want), f"{backend} returned {sorted(got)}, reference {sorted(want)}{where}"
            for name, _, dtype, kind, _ in case.spec.outputs:
                assert_close(np.asarray(got[name]), want[name], dtype, f"{backend}: output {name!r} ({kind})",
                             K=K, bound=2 * oracle.bounds[name], note=where)
            checked += 1
    record_checks(backend, checked)


def _traced_problem(case):
    return [(*case.problem, None)]


@pytest.mark.parametrize("backend", _params(gpu=False))
@settings(deadline=None)
@given(case=epilogues(), data=st.data())
def test_cpu_backend_matches_interpreter(backend, case, data):
    check_conformance(backend, case, _traced_problem(case) +
                      data.draw(larger_problems(case, SIZES_PER_TREE), label="larger problems"))


@pytest.mark.parametrize("shard", range(GPU_SHARDS))
@pytest.mark.parametrize("backend", _params(gpu=True))
@settings(deadline=None, max_examples=max(1, min(settings.default.max_examples, GPU_TREES)),
          derandomize=GPU_SHARDS == 1 and settings.default.derandomize, database=None)
@given(case=epilogues(), data=st.data())
def test_gpu_backend_matches_interpreter(backend, shard, case, data):
    check_conformance(backend, case, _traced_problem(case) +
                      data.draw(larger_problems(case, SIZES_PER_TREE), label="larger problems"))
