"""numba_cuda's sm_90a kernel (sm90=True) on an H100/H200: trees with every reduction kind, aux
inputs and two outputs, fp16 and bf16, edge tiles, K tails, batched and batch-shared operands,
both B layouts, deterministic partials, poisoned outputs, both schedules (ping-pong forced on
shapes too small for "auto" to pick it); calls TMA cannot take must fall back to mma.sync,
still correct, and say so in kernel.stages["sm90"]."""
import os
import sys

import numpy as np
import pytest

import evt_core
from evt_core import ops

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "numba_cuda"))
from sm90_kernels import _ffn_forward, _gelu_backward  # noqa: E402
from trees import DTYPES, case, compare, relayout  # noqa: E402

pytestmark = pytest.mark.gpu


@pytest.fixture(autouse=True)
def sm90_gpu(monkeypatch):
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    ok = NumbaCudaBackend().available()
    if not ok or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip(f"needs a CUDA GPU: {ok.reason or 'simulator selected'}")
    from evt_backends.numba_cuda.runtime import driver
    if driver.compute_capability() != (9, 0):
        pytest.skip("needs an sm_90 GPU")
    monkeypatch.setenv("EVT_POISON", "1")


# (L, M, N, K): whole tiles, edge tiles in M and N, K tails (K % 64 != 0), M < 64, a single row
SHAPES = [(0, 128, 128, 64), (2, 200, 136, 72), (0, 77, 48, 40), (3, 129, 264, 96), (0, 1, 16, 8),
          (0, 300, 520, 200), (0, 1000, 1000, 1000)]


def _run(tree, A, B, inputs, what, **opts):
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, **opts)
    got = k(A, B, **inputs)
    compare(got, evt_core.interpret(tree, A, B, **inputs), what)
    return k.stages.get("sm90", "")


SCHEDULES = ["pingpong", "cooperative", "overlap"]
FRAG_SHAPES = [(0, 128, 128, 64), (2, 200, 136, 72), (0, 77, 48, 40), (3, 129, 264, 96), (0, 1, 16, 8),
               (0, 1000, 1000, 1000)]
FRAG_SHAPES_RING = FRAG_SHAPES + [(0, 2000, 1032, 40)]      # 16 x 9 tiles (>= 2 per CTA), K < one k-block


def _bias_gelu(accum, bias):
    D = ops.gelu_tanh(accum + bias)
    return D


def _bias_relu(accum, bias):
    D = ops.relu(accum + bias)
    return D


def _sm90_stage(stage, schedule):
    """The sm_90a kernel ran in `schedule` ("overlap": overlapped, or cooperative with the reason
    the kind cannot overlap, select.overlap_refusal)."""
    if schedule == "overlap":
        return stage.startswith("sm_90a") and ("overlapped cooperative schedule" in stage or
                                               "sm90_schedule='overlap' not taken" in stage)
    return stage.startswith("sm_90a") and (schedule == "auto" or f"{schedule.replace('pingpong', 'ping-pong')} "
                                           "schedule" in stage)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bias_relu_stats(ab, shape, schedule):
    tree, A, B, inputs = case("bias_relu_stats", *shape, ab=ab, out="float16")
    stage = _run(tree, A, B, inputs, f"{ab} {shape} {schedule}", sm90_schedule=schedule)
    assert _sm90_stage(stage, schedule), stage


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("name,L", [("activations", 0), ("activations", 2), ("means", 3)])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("det", [False, True])
def test_trees(name, L, ab, det, schedule):
    tree, A, B, inputs = case(name, L, 150, 264, 48, ab=ab, out="bfloat16" if ab == "bfloat16" else "float16")
    stage = _run(tree, A, B, inputs, f"{name} {ab} det={det} {schedule}", deterministic=det, sm90_schedule=schedule)
    assert _sm90_stage(stage, schedule), stage


@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,pitch", [((0, 200, 136, 72), None), ((2, 129, 264, 96), None),
                                         ((0, 77, 48, 40), None), ((0, 300, 136, 64), 137)],
                         ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
def test_tile_inputs_staged_by_cp_async(ab, shape, pitch):
    """An (M, N) fp16/bf16 input is copied into shared memory under the mainloop (cooperative
    schedule), zero-filled past the edges; rows that are not 16-byte aligned (pitch: z as a
    view with that row stride) are loaded per row."""
    tree, A, B, inputs = case("dgelu", *shape, ab=ab, out=ab)
    if pitch:
        z = inputs["z"]
        wide = np.zeros(z.shape[:-1] + (pitch,), z.dtype)
        wide[..., :z.shape[-1]] = z
        inputs["z"] = wide[..., :z.shape[-1]]
    stage = _run(tree, A, B, inputs, f"dgelu {ab} {shape}", sm90_schedule="cooperative", aux_ring=False)
    assert stage.startswith("sm_90a") and ("staged by cp.async" in stage) is (pitch is None), stage


@pytest.mark.parametrize("schedule", ["cooperative", "overlap"])
@pytest.mark.parametrize("name", ["dgelu", "stats", "ln_backward"])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("shape", FRAG_SHAPES_RING, ids=lambda s: "x".join(map(str, s)))
def test_tile_inputs_through_the_ring(name, ab, det, shape, schedule):
    """16-bit (M, N) inputs TMA-loaded by the producer into the ring positions after each tile's
    k-blocks (aux_ring, the default): one and two inputs (one and two aux stages per tile),
    edge tiles TMA zero-fills, batched 3-D input maps, many tiles per CTA (the ring wraps with
    k-blocks and aux stages interleaved), K shorter than the ring; overlapped, a tile's aux
    stages held while the next tile's first k-blocks run (consumer_overlap's invariant)."""
    tree, A, B, inputs = case(name, *shape, ab=ab, out=ab)
    stage = _run(tree, A, B, inputs, f"{name} {ab} {shape} det={det} {schedule}", deterministic=det,
                 sm90_schedule=schedule, sm90_epilogue="fragment")
    assert "TMA-loaded through the ring" in stage or shape[1] == 1, stage
    assert ("overlapped cooperative schedule" in stage) is (schedule == "overlap"), stage


def test_tile_inputs_through_the_ring_repeated():
    """The ring's aux stages across many calls of a many-tile problem (a released slot refilled
    while a warpgroup still read it would show as a wrong tile in some calls, not all)."""
    tree, A, B, inputs = case("ln_backward", 0, 4100, 2056, 136)
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, sm90_schedule="cooperative")
    ref = evt_core.interpret(tree, A, B, **inputs)
    for i in range(10):
        compare(k(A, B, **inputs), ref, f"call {i}")
    assert "TMA-loaded through the ring" in k.stages["sm90"], k.stages["sm90"]




@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("name", ["stats", "activations", "dgelu", "bce_uturn"])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("shape", FRAG_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_fragment_epilogue(name, ab, det, schedule, shape):
    """The epilogue on the wgmma fragments with TMA-stored outputs: row, column and whole-tile
    reductions, row and column vectors, (M, N) inputs staged by cp.async (16-bit, and bce_uturn's fp32
    targets read a column pair per 64-bit load; cooperative; ping-pong
    then takes the staged epilogue), edge tiles the TMA stores clip, batched 3-D output maps."""
    tree, A, B, inputs = case(name, *shape, ab=ab, out=ab)
    stage = _run(tree, A, B, inputs, f"{name} {ab} {shape} det={det} {schedule}", deterministic=det,
                 sm90_schedule=schedule, sm90_epilogue="fragment")
    mn_input = name in ("stats", "dgelu", "bce_uturn") and shape[1] > 1      # (an M = 1 trace has no (M, N) input)
    assert _sm90_stage(stage, schedule) and ("TMA-stored outputs" in stage) is not (mn_input and schedule == "pingpong"), \
        stage


@pytest.mark.parametrize("shape", [(0, 1000, 1000, 200), (2, 200, 136, 72)], ids=lambda s: "x".join(map(str, s)))
def test_fast_math_true_approximates_within_its_tolerance(shape):
    """fast_math=True: bce_uturn's exp, log and sigmoid, whose values reach fp32 sums, as MUFU
    approximations (lg2.approx's error is absolute), against the fast-math tolerance the cupy
    tests use (rtol 5e-3, atol 5e-3 x max |ref| per output)."""
    tree, A, B, inputs = case("bce_uturn", *shape)
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, fast_math=True)
    got, ref = k(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs)
    assert "TMA-stored outputs" in k.stages.get("sm90", ""), k.stages
    for name, r in ref.items():
        g, r = np.asarray(got[name]).astype(np.float32), np.asarray(r).astype(np.float32)
        assert g.shape == r.shape and np.allclose(g, r, rtol=5e-3, atol=5e-3 * max(float(np.abs(r).max()), 1e-30)), \
            f"{name}: max |err| {np.abs(g - r).max()}"


def test_fragment_epilogue_falls_back_where_it_cannot_store():
    """Outputs TMA cannot store (rows of 20 x 2 bytes; B K-major so the mainloop still fits) and
    fp32 outputs take the staged epilogue, as does sm90_epilogue="staged"."""
    tree, A, B, inputs = case("activations", 2, 100, 20, 40)
    A, B = relayout("B_colmajor", A, B)
    assert "staged epilogue" in _run(tree, A, B, inputs, "N = 20", sm90_schedule="pingpong")
    tree, A, B, inputs = case("bias_relu_stats", 0, 100, 64, 40)
    assert "staged epilogue" in _run(tree, A, B, inputs, "fp32 output F", sm90_schedule="pingpong")
    tree, A, B, inputs = case("activations", 0, 100, 64, 40)
    assert "staged epilogue" in _run(tree, A, B, inputs, "forced", sm90_schedule="pingpong", sm90_epilogue="staged")
    assert "staged epilogue" in _run(tree, A, B, inputs, "auto: transcendentals, no reduction", sm90_schedule="pingpong")
    assert "TMA-stored" in _run(tree, A, B, inputs, "fragment", sm90_schedule="pingpong", sm90_epilogue="fragment")


@pytest.mark.parametrize("ctas", [1, 3, 0])
@pytest.mark.parametrize("name", ["gelu_backward", "ffn_forward", "ln_backward", "bare"])
@pytest.mark.parametrize("K", [40, 200, 1000])
def test_overlapped_schedule_many_tiles_per_cta(monkeypatch, name, K, ctas):
    """sm90_schedule="overlap" (codegen/consumer_overlap.py) with 1 or 3 CTAs (sm_count forced)
    or all SMs over 16 x 9 tiles, three calls each: a tile's epilogue pieces run between the
    next tile's k-blocks, so K shorter than the pieces (40: one k-block), between (200) and
    longer (1000); the column vector handed from tile to tile (FFN forward), a column sum and
    the GELU derivative's input through the ring (GELU backward), two ring inputs (LayerNorm
    backward); poisoned outputs, fp16."""
    from evt_backends.numba_cuda.runtime import launch_sm90
    if ctas:
        monkeypatch.setattr(launch_sm90, "sm_count", lambda: ctas)
    M, N = 2000, 1032
    rng = np.random.default_rng(K)
    if name == "ln_backward":
        tree, A, B, inputs = case("ln_backward", 0, M, N, K, ab="float16", out="float16")
    else:
        A = (rng.integers(-3, 4, (M, K)) / 4).astype(np.float16)
        B = (rng.integers(-3, 4, (K, N)) / 4).astype(np.float16)
        ex = {"accum": np.empty((M, N), np.float32)}
        if name == "gelu_backward":
            inputs = {"z": (rng.integers(-12, 12, (M, N)) / 4).astype(np.float16)}
            tree = evt_core.trace(_gelu_backward, {**ex, **inputs, "dz": np.empty((M, N), np.float16),
                                                   "dbias": np.empty((N,), np.float32)})
        elif name == "ffn_forward":
            inputs = {"bias": (rng.integers(-8, 8, N) / 4).astype(np.float16)}
            tree = evt_core.trace(_ffn_forward, {**ex, **inputs, "z": np.empty((M, N), np.float16),
                                                 "D": np.empty((M, N), np.float16)})
        else:
            inputs = {}
            tree = evt_core.trace(lambda accum: {"D": accum}, {**ex, "D": np.empty((M, N), np.float16)})
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, sm90_schedule="overlap")
    ref = evt_core.interpret(tree, A, B, **inputs)
    for i in range(3):
        compare(k(A, B, **inputs), ref, f"overlap {name} K={K} ctas={ctas} call {i}")
    assert "overlapped cooperative schedule" in k.stages["sm90"] and "tile 128x128x64" in k.stages["sm90"], \
        k.stages["sm90"]


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_many_tiles_per_cta(schedule):
    """More tiles than two per SM, odd counts per CTA and edge tiles: every CTA alternates
    warpgroups several times and ring positions wrap across tiles. "auto" picks ping-pong for an
    epilogue without per-row inputs, cooperative for one with an (M, N) input."""
    tree, A, B, inputs = case("bias_relu_stats", 0, 2000, 2056, 200, ab="float16", out="float16")
    stage = _run(tree, A, B, inputs, schedule, sm90_schedule=schedule)
    assert _sm90_stage(stage, schedule), stage
    assert "cooperative schedule" in _run(tree, A, B, inputs, "auto, (M, N) input C")
    ex = {"accum": np.empty((2000, 2056), np.float32), "bias": inputs["bias"], "D": np.empty((2000, 2056), np.float16)}
    gelu = evt_core.trace(_bias_gelu, ex)
    assert "ping-pong schedule" in _run(gelu, A, B, {"bias": inputs["bias"]}, "auto, bias row")


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("bias_dtype", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("M,N", [(4000, 2056), (333, 200)])
def test_fragment_column_vector_staged_per_tile(schedule, bias_dtype, M, N):
    """The fragment epilogue's column vector, staged per tile in each consumer warpgroup's shared
    slice: several tiles per warpgroup (4000 x 2056: 544 tiles, the slice rewritten tile after
    tile in both schedules), edge tiles in N (2056 = 16 x 128 + 8, 200 = 128 + 72: zeros past N),
    16-bit and fp32 vectors. K is small so the epilogue, not the mainloop, dominates."""
    _, A, B, _ = case("activations", 0, M, N, 64, ab="float16", out="float16")
    bias = (np.random.default_rng(1).integers(-8, 8, N) / 4).astype(np.float32).astype(DTYPES[bias_dtype])
    ex = {"accum": np.empty((M, N), np.float32), "bias": bias, "D": np.empty((M, N), np.float16)}
    tree = evt_core.trace(_bias_relu, ex)      # exact: a wrong or stale bias column cannot hide in the tolerance
    stage = _run(tree, A, B, {"bias": bias}, f"bias {bias_dtype} {M}x{N} {schedule}", sm90_schedule=schedule,
                 sm90_epilogue="fragment")
    assert _sm90_stage(stage, schedule) and "TMA-stored outputs" in stage, stage


@pytest.mark.parametrize("layout,fits", [("B_colmajor", True), ("shared_A", True), ("colmajor_aux", True),
                                         ("A_colmajor", False), ("odd_K", False)])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_layouts(layout, fits, schedule):
    K = 60 if layout == "odd_K" else 64
    tree, A, B, inputs = case("bias_relu_stats", 2, 190, 144, K, col_major_aux=layout == "colmajor_aux")
    A, B = relayout(layout, A, B)
    stage = _run(tree, A, B, inputs, f"{layout} {schedule}", sm90_schedule=schedule)
    assert stage.startswith("sm_90a") if fits else stage.startswith("fallback"), stage


@pytest.mark.parametrize("schedule", SCHEDULES)
def test_deterministic_runs_are_bit_identical(schedule):
    tree, A, B, inputs = case("bias_relu_stats", 2, 333, 200, 136)
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, deterministic=True, sm90_schedule=schedule)
    a, b = k(A, B, **inputs), k(A, B, **inputs)
    for name in a:
        assert np.array_equal(np.asarray(a[name]), np.asarray(b[name]), equal_nan=True), name


@pytest.mark.parametrize("name", ["bias_relu_stats", "stats"])
@pytest.mark.parametrize("schedule", SCHEDULES)
def test_cuda_graph_capture_with_new_operands(schedule, name):
    """Inside a CUDA-graph capture new A/B addresses need new tensor maps: they are copied on the
    capturing stream (runtime/map_slots.py), so the graph replays the sm_90a kernel on them, and
    eager calls before and after stay correct."""
    torch = pytest.importorskip("torch")
    tree, A, B, inputs = case(name, 0, 256, 264, 128, ab="float16", out="float16")
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, sm90_schedule=schedule)
    dev = {n: torch.from_numpy(np.ascontiguousarray(v)).cuda() if hasattr(v, "shape") else v for n, v in inputs.items()}
    tA, tB = torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda()
    ref = evt_core.interpret(tree, A, B, **inputs)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        k(tA, tB, **dev)                                  # warm-up: compiled, first maps
    torch.cuda.current_stream().wait_stream(s)
    sA, sB = torch.empty_like(tA), torch.empty_like(tB)  # addresses the capture sees first
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = k(sA, sB, **dev)
    assert k.stages["sm90"].startswith("sm_90a")
    sA.copy_(tA)
    sB.copy_(tB)
    g.replay()
    torch.cuda.synchronize()
    compare({n: v.cpu().numpy() for n, v in out.items()}, ref, "captured")
    compare({n: v.cpu().numpy() for n, v in k(sA, sB, **dev).items()}, ref, "eager after capture")


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("epilogue", ["staged", "fragment"])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", [(2, 200, 144, 72), (0, 1000, 1000, 1000), (0, 4096, 512, 2048), (0, 8, 48, 40)],
                         ids=lambda s: "x".join(map(str, s)))
def test_m_major_a(shape, ab, epilogue, schedule):
    """An M-contiguous A (a weight gradient's transposed activations) runs on the sm_90a kernel:
    TMA panels and wgmma's transpose-A bit, edge tiles in M, N and K included."""
    tree, A, B, inputs = case("bias_relu_stats", *shape, ab=ab, out="float16")
    A = np.asfortranarray(A) if A.ndim == 2 else relayout("A_colmajor", A, B)[0]
    stage = _run(tree, A, B, inputs, f"M-major A {ab} {shape} {epilogue} {schedule}", sm90_schedule=schedule,
                 sm90_epilogue=epilogue)
    assert _sm90_stage(stage, schedule) and "A M-major" in stage, stage


def _row_col(accum, rowscale, bias, alpha):
    D = ops.relu(alpha * accum * rowscale + bias)
    return D


def _wide_case(name, L, M, N, K, ab, layout):
    """(tree, A, B, inputs) of the 128 x 256 tile's epilogue kinds (select.sm90_wide_tile_fits:
    one 16-bit output, column and row vectors, scalars) on small-integer operands, A and B in
    `layout` (relayout's names; "plain": K-major A, N-major B)."""
    _, A, B, _ = case("activations", L, M, N, K, ab=ab)
    A, B = relayout(layout, A[None] if not L else A, B[None] if not L else B)
    A, B = (A[0], B[0]) if not L else (A, B)
    rng = np.random.default_rng(2)
    lead = (L,) if L else ()
    ex = {"accum": np.empty(lead + (M, N), np.float32), "D": np.empty(lead + (M, N), DTYPES[ab])}
    if name == "bare":
        inputs = {}
        tree = evt_core.trace(lambda accum: {"D": accum}, ex)
    elif name == "bias_relu":
        inputs = {"bias": (rng.integers(-8, 8, N) / 4).astype(np.float32)}
        tree = evt_core.trace(_bias_relu, {**ex, **inputs})
    else:
        inputs = {"rowscale": rng.integers(1, 4, lead + (M, 1)).astype(np.float16),
                  "bias": rng.integers(-3, 3, N).astype(np.float16), "alpha": 0.5}
        tree = evt_core.trace(_row_col, {**ex, **inputs})
    return tree, A, B, inputs


# (L, M, N, K): M below 64 and N below one 64-column panel, a single row, batched (3-D maps) with
# N = 2 x 256 + 8 (three panels of the last tile past N), edge tiles in M and N with the last
# tile's fourth panel partial (1000 = 3 x 256 + 232), K tails (K % 64 != 0)
WIDE_SHAPES = [(0, 77, 48, 40), (0, 1, 16, 8), (2, 200, 520, 72), (3, 129, 264, 96), (0, 1000, 1000, 1000)]


@pytest.mark.parametrize("layout", ["plain", "A_colmajor", "B_colmajor"])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["bare", "bias_relu", "row_col"])
@pytest.mark.parametrize("shape", WIDE_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_wide_tile_forced(monkeypatch, shape, name, ab, layout):
    """The 128 x 256 tile (m64n256k16, 128 accumulators per thread, a 3-slot ring) on shapes the
    rule would leave at 128 x 128 (sm90_wide_tile_pays forced): edge tiles in M and N whose
    store panels TMA clips or skips, K tails, batched operands, M- and K-major A, N- and K-major
    B, a column vector loaded twice per thread and tile, a row vector and a scalar."""
    from evt_backends.numba_cuda import select
    monkeypatch.setattr(select, "sm90_wide_tile_pays", lambda b, program=None: True)
    L, M, N, K = shape
    if layout != "plain" and (M % 8 if layout == "A_colmajor" else K % 8):
        pytest.skip("TMA needs 16-byte rows: the call would fall back")
    tree, A, B, inputs = _wide_case(name, *shape, ab, layout)
    stage = _run(tree, A, B, inputs, f"wide {name} {ab} {shape} {layout}")
    assert stage.startswith("sm_90a") and "tile 128x256x64" in stage and "cooperative schedule" in stage, stage


@pytest.mark.parametrize("ctas", [1, 2, 5])
def test_wide_tile_many_tiles_per_cta(monkeypatch, ctas):
    """A persistent grid of 1, 2 or 5 CTAs over 32 tiles of 128 x 256 (sm_count and the rule
    forced; cooperative, which "auto" would not pick for so many tiles per CTA): each CTA walks
    many tiles, the 3-slot ring wraps across tiles, and a column vector's slice is rewritten
    tile after tile."""
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.runtime import launch_sm90
    monkeypatch.setattr(select, "sm90_wide_tile_pays", lambda b, program=None: True)
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: ctas)
    tree, A, B, inputs = _wide_case("bias_relu", 0, 1000, 1000, 328, "float16", "plain")
    stage = _run(tree, A, B, inputs, f"wide, {ctas} CTAs", sm90_schedule="cooperative")
    assert "tile 128x256x64" in stage and "32 tiles" in stage, stage


@pytest.mark.parametrize("M,N,K", [(1096, 2776, 4100), (1096, 2824, 4100)])
def test_wide_tile_by_the_rule(M, N, K):
    """A weight gradient the rule itself gives 128 x 256 tiles (select.sm90_tile_n: cooperative,
    a plain store, K >= 4096, 99 tiles of 128 x 256 against 132 SMs): M-contiguous A, N-major B,
    edge tiles in M (1096 = 8 x 128 + 72) and N (2776 = 10 x 256 + 216, 2824 = 11 x 256 + 8) and
    a K tail (4100 = 64 x 64 + 4)."""
    from evt_backends.numba_cuda.runtime import launch_sm90
    wide, narrow = -(-M // 128) * -(-N // 256), -(-M // 128) * -(-N // 128)
    if not (wide >= 0.7 * launch_sm90.sm_count() and narrow < 2 * launch_sm90.sm_count()):
        pytest.skip(f"{launch_sm90.sm_count()} SMs: this shape is outside the rule's window on this GPU")
    tree, A, B, inputs = _wide_case("bare", 0, M, N, K, "float16", "plain")
    stage = _run(tree, np.asfortranarray(A), B, inputs, f"weight gradient {M}x{N}x{K}")
    assert "tile 128x256x64" in stage and "cooperative schedule" in stage and "A M-major, B N-major" in stage, stage


def _layernorm_stats(accum, bias, r):
    y = accum + bias + r
    return {"y": y, "y_sum": ops.sum(y, over="N"), "y_sqsum": ops.sum(y * y, over="N")}


def _wide_w4(L, M, N, K, ab):
    """(tree, A, B, inputs) of bench's W4 (a bias, an (M, N) residual, y and its two row sums)."""
    _, A, B, _ = case("activations", L, M, N, K, ab=ab)
    rng = np.random.default_rng(3)
    lead = (L,) if L else ()
    inputs = {"bias": (rng.integers(-8, 8, N) / 4).astype(DTYPES[ab]),
              "r": rng.integers(-3, 4, lead + (M, N)).astype(DTYPES[ab])}
    ex = {"accum": np.empty(lead + (M, N), np.float32), **inputs, "y": np.empty(lead + (M, N), DTYPES[ab]),
          **{k: np.empty(lead + (M,), np.float32) for k in ("y_sum", "y_sqsum")}}
    return evt_core.trace(_layernorm_stats, ex), A, B, inputs


@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", WIDE_SHAPES + [(0, 2000, 1032, 40)], ids=lambda s: "x".join(map(str, s)))
def test_wide_tile_ring_row_sums(shape, ab, det):
    """W4's tree at 128 x 256 by sm90_tile_n=256: the residual's eight panels TMA-loaded into two
    ring positions after each tile's k-blocks (a 3-slot ring), zero-filled past M and N, 3-D
    maps for a batched residual, and two fp32 row sums over 256 columns (atomic or
    deterministic partials, one slot per 256-wide tile)."""
    tree, A, B, inputs = _wide_w4(*shape, ab)
    stage = _run(tree, A, B, inputs, f"W4 wide {ab} {shape} det={det}", deterministic=det, sm90_tile_n=256)
    assert "tile 128x256x64" in stage and "cooperative schedule" in stage, stage
    assert "TMA-loaded through the ring" in stage or shape[1] == 1, stage     # M = 1: r is a column vector


@pytest.mark.parametrize("ctas", [1, 3])
def test_wide_tile_ring_many_tiles_per_cta(monkeypatch, ctas):
    """1 or 3 CTAs over 8 x 4 tiles of 128 x 256 (sm_count forced): the 3-slot ring wraps with
    k-blocks and two aux stages interleaved, tile after tile, across repeated calls."""
    from evt_backends.numba_cuda.runtime import launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: ctas)
    tree, A, B, inputs = _wide_w4(0, 1000, 1000, 328, "float16")
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, sm90_tile_n=256)
    ref = evt_core.interpret(tree, A, B, **inputs)
    for i in range(3):
        compare(k(A, B, **inputs), ref, f"W4 wide, {ctas} CTAs, call {i}")
    assert "tile 128x256x64" in k.stages["sm90"] and "32 tiles" in k.stages["sm90"], k.stages["sm90"]


def _two_outputs(accum, bias):
    z = accum + bias
    return {"z": z, "D": ops.relu(z)}


def _col_sums(accum, bias):
    D = accum + bias
    return {"D": D, "S": ops.sum(D, over="M")}


def _two_residuals(accum, r, g):
    return {"D": accum * g + r}


def _wide_more(name, L, M, N, K, ab):
    """(tree, A, B, inputs) of the 128 x 256 kinds beyond one staged output: bench's W1 (a bias,
    z and relu(z): two outputs recycling two panel buffers each), W2's kind (a bias and a column
    sum, the whole tile staged beside 8 KB of column scratch) and two (M, N) inputs through the
    ring (three aux stages beside a 4-slot ring, the output recycled)."""
    _, A, B, _ = case("activations", L, M, N, K, ab=ab)
    rng = np.random.default_rng(4)
    lead = (L,) if L else ()
    out = {"D": np.empty(lead + (M, N), DTYPES[ab])}
    ex = {"accum": np.empty(lead + (M, N), np.float32)}
    if name == "two_outputs":
        inputs = {"bias": (rng.integers(-8, 8, N) / 4).astype(DTYPES[ab])}
        tree = evt_core.trace(_two_outputs, {**ex, **inputs, **out, "z": out["D"]})
    elif name == "col_sums":
        inputs = {"bias": (rng.integers(-8, 8, N) / 4).astype(DTYPES[ab])}
        tree = evt_core.trace(_col_sums, {**ex, **inputs, **out, "S": np.empty(lead + (N,), np.float32)})
    else:
        inputs = {k: rng.integers(-3, 4, lead + (M, N)).astype(DTYPES[ab]) for k in ("r", "g")}
        tree = evt_core.trace(_two_residuals, {**ex, **inputs, **out})
    return tree, A, B, inputs


@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("name", ["two_outputs", "col_sums", "two_residuals"])
@pytest.mark.parametrize("shape", WIDE_SHAPES + [(0, 2000, 1032, 40)], ids=lambda s: "x".join(map(str, s)))
def test_wide_tile_outputs_column_sums_and_two_ring_inputs(shape, name, ab, det):
    """sm90_tile_n=256 on W1's, W2's and two-residual kinds: a recycled panel buffer is written
    again only after its previous panel's TMA store read it (stale or torn panels would show as
    wrong values), column sums over 256 columns (atomic or deterministic partials), and both
    inputs' panels through the ring."""
    if det and name != "col_sums":
        pytest.skip("no reduction")
    tree, A, B, inputs = _wide_more(name, *shape, ab)
    stage = _run(tree, A, B, inputs, f"wide {name} {ab} {shape} det={det}", deterministic=det, sm90_tile_n=256)
    assert "tile 128x256x64" in stage and "cooperative schedule" in stage, stage


@pytest.mark.parametrize("name", ["two_outputs", "col_sums"])
@pytest.mark.parametrize("ctas", [1, 3])
def test_wide_tile_recycled_staging_many_tiles_per_cta(monkeypatch, name, ctas):
    """1 or 3 CTAs over 8 x 4 tiles of 128 x 256 (sm_count forced), three calls: each
    warpgroup's two panel buffers per output turn over 4 times a tile, tile after tile."""
    from evt_backends.numba_cuda.runtime import launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: ctas)
    tree, A, B, inputs = _wide_more(name, 0, 1000, 1000, 328, "float16")
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, sm90_tile_n=256)
    ref = evt_core.interpret(tree, A, B, **inputs)
    for i in range(3):
        compare(k(A, B, **inputs), ref, f"wide {name}, {ctas} CTAs, call {i}")
    assert "tile 128x256x64" in k.stages["sm90"] and "32 tiles" in k.stages["sm90"], k.stages["sm90"]
