"""CPU checks of the sm_90a kernel's 128 x 256 tile (BN = 256, m64n256k16): which calls take it
(select.sm90_tile_n), the generated source and shared-memory layout at that width, and the
tensor maps of its operands. Its SASS is checked in test_sm90_codegen.py (the wide_* kernels), the
runner's launch of it in test_fastcall.py, its results on the H200 in
tests/gpu/test_numba_sm90.py (test_wide_tile)."""
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

import evt_core  # noqa: E402
from evt_core import ops  # noqa: E402
from evt_backends.gpu import sm90  # noqa: E402
from evt_backends.gpu.fastmath import fast_ops  # noqa: E402
from evt_backends.numba_cuda import select  # noqa: E402
from evt_backends.numba_cuda.codegen import epilogue_fragment as ef  # noqa: E402
from evt_backends.numba_cuda.codegen.frag_layout import FragLayout  # noqa: E402
from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_source  # noqa: E402

SMS = 132          # the H200's


def _trace(fn, inputs, outputs):
    ex = {"accum": np.empty((64, 64), np.float32), **inputs, **outputs}
    return evt_core.trace(fn, ex).program


def _bare(accum):
    return {"D": accum}


def _bias_gelu(accum, bias):
    return {"D": ops.gelu_tanh(accum + bias)}


def _row_col(accum, rowscale, bias, alpha):
    return {"D": ops.relu(alpha * accum * rowscale + bias)}


def _residual(accum, r):
    return {"D": accum + r}


def _row_sums(accum):
    return {"D": accum, "S": ops.sum(accum, over="N")}


def _two_outputs(accum, bias):
    z = accum + bias
    return {"z": z, "D": ops.relu(z)}


def _three_outputs(accum, bias):
    z = accum + bias
    return {"z": z, "D": ops.relu(z), "E": ops.gelu_tanh(z)}


def _layernorm_stats(accum, bias, r):
    y = accum + bias + r
    return {"y": y, "y_sum": ops.sum(y, over="N"), "y_sqsum": ops.sum(y * y, over="N")}


def _col_sums(accum):
    return {"D": accum, "S": ops.sum(accum, over="M")}


H = {"D": np.empty((64, 64), np.float16)}
PROGRAMS = {
    "bare": _trace(_bare, {}, H),
    "bias_gelu": _trace(_bias_gelu, {"bias": np.empty(64, np.float32)}, H),
    "row_col": _trace(_row_col, {"rowscale": np.empty((64, 1), np.float16), "bias": np.empty(64, np.float16),
                                 "alpha": 0.5}, H),
    "residual": _trace(_residual, {"r": np.empty((64, 64), np.float16)}, H),
    "row_sums": _trace(_row_sums, {}, {**H, "S": np.empty(64, np.float32)}),
    "two_outputs": _trace(_two_outputs, {"bias": np.empty(64, np.float16)}, {"z": np.empty((64, 64), np.float16), **H}),
    "three_outputs": _trace(_three_outputs, {"bias": np.empty(64, np.float16)},
                            {k: np.empty((64, 64), np.float16) for k in ("z", "D", "E")}),
    "fp32_out": _trace(_bare, {}, {"D": np.empty((64, 64), np.float32)}),
    # bench's W4: a column vector, a 16-bit (M, N) residual (through the ring), two fp32 row sums
    "w4": _trace(_layernorm_stats, {"bias": np.empty(64, np.float16), "r": np.empty((64, 64), np.float16)},
                 {"y": np.empty((64, 64), np.float16), **{k: np.empty(64, np.float32) for k in ("y_sum", "y_sqsum")}}),
    "fp32_residual": _trace(_residual, {"r": np.empty((64, 64), np.float32)}, H),
    "col_sums": _trace(_col_sums, {}, {**H, "S": np.empty(64, np.float32)}),
}
PTRS = [0x10000 * (k + 1) for k in range(8)]


def _bound(p, M, N, K, L=1, a_mmajor=True, b_kmajor=False):
    """A bound call of program p: a weight gradient's operands by default (A M-contiguous, B
    N-contiguous), dense (M, N) outputs and inputs."""
    def tensor(op):
        s = p.spans(op)
        return SimpleNamespace(strides=(0, N if s[1] else 0, 1 if s[2] else 0))
    return SimpleNamespace(L=L, M=M, N=N, K=K, dtype="float16", a_strides=(0, 1, M) if a_mmajor else (0, K, 1),
                           b_strides=(0, 1, K) if b_kmajor else (0, N, 1),
                           outputs=[tensor(t) for t in p.outputs], inputs=[tensor(t) for t in p.inputs])


@pytest.fixture
def gpu(monkeypatch):
    from evt_backends.numba_cuda.runtime import driver, launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: SMS)
    monkeypatch.setattr(driver, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(select, "encode_maps", lambda *a: b"")


def _choose(name, M, N, K, L=1, schedule="auto", epilogue="auto", tile_n="auto", det=False, **kw):
    p = PROGRAMS[name]
    v, note = select.variant(_bound(p, M, N, K, L, **kw), 0x1000, 0x2000, False, True, schedule, p, PTRS, det,
                             PTRS, epilogue, fast_ops(p), True, tile_n)
    return v, note


@pytest.mark.parametrize("name,M,N,K,L,kw", [
    ("bare", 1024, 4096, 16384, 1, {}),         # BERT's weight gradients, measured 8-12 % faster at 128 x 256
    ("bare", 4096, 1024, 16384, 1, {}),
    ("bare", 3072, 1024, 16384, 1, {}),         # 96 tiles of 128 x 256: just over 0.7 x 132
    ("bare", 3000, 1000, 4100, 1, {}),          # edge tiles in M and N, a K tail
    ("bare", 128 * 93, 256, 4096, 1, {}),       # 93 tiles >= 92.4
    ("bare", 512, 1024, 8192, 6, {}),           # batches count: 6 x 4 x 4 tiles
    ("bare", 4096, 1024, 16384, 1, {"a_mmajor": False, "b_kmajor": True}),
    ("bias_gelu", 4096, 1024, 16384, 1, {}),    # a column vector
    ("row_col", 4096, 1024, 16384, 1, {}),      # row and column vectors, a scalar
    ("bare", 8192, 8192, 4096, 1, {}),          # a plain store over 15.5 waves of 128 x 256 (ping-pong before)
    ("bare", 8192, 3072, 768, 1, {}),           # the same at small K: 5.8 waves
    ("w4", 4096, 4096, 4096, 1, {"a_mmajor": False}),   # W4 at 4096^3: measured 5 % faster at 128 x 256
    ("w4", 4096, 1024, 16384, 1, {}),           # its residual through the ring, two row sums
    ("residual", 4096, 1024, 16384, 1, {}),     # an (M, N) input through the ring
    ("row_sums", 4096, 1024, 16384, 1, {}),     # a row reduction
    ("two_outputs", 4096, 1024, 16384, 1, {}),  # W1's kind, measured 4.9 % faster at 4096^3 (2026-12-07)
    ("col_sums", 4096, 4096, 4096, 1, {}),      # W2's kind, measured 4.1 % faster at 4096^3
])
def test_wide_tile_where_it_pays(gpu, name, M, N, K, L, kw):
    v, note = _choose(name, M, N, K, L, **kw)
    assert v[0] == "sm90" and v[9] == 256 and not v[5] and v[7], v
    assert "tile 128x256x64" in note and "cooperative schedule" in note, note


@pytest.mark.parametrize("name,M,N,K,opts,why", [
    ("bare", 4096, 1024, 2048, {}, "K below 4096"),
    ("bare", 128 * 92, 256, 4096, {}, "92 tiles < 0.7 x 132"),
    ("bare", 1024, 1024, 16384, {}, "32 tiles"),
    ("bare", 16384, 128, 16384, {}, "N below 256"),
    ("bare", 8192, 768, 3072, {}, "a plain store over 1.5 waves of 128 x 256: ping-pong 128 x 128"),
    ("bare", 4096, 1024, 16384, {"schedule": "pingpong"}, "ping-pong"),
    ("bare", 4096, 1024, 16384, {"epilogue": "staged"}, "the staged epilogue"),
    ("fp32_out", 4096, 1024, 16384, {}, "an fp32 output: the staged epilogue"),
    ("w4", 8192, 3072, 768, {}, "W4 at its bench shape: K below 4096"),
    ("bare", 4096, 1024, 16384, {"tile_n": 128}, "sm90_tile_n=128"),
    ("three_outputs", 4096, 1024, 16384, {}, "three outputs: no 3-slot ring fits"),
    ("two_outputs", 8192, 3072, 768, {}, "two outputs (W1's kind) at K below 4096"),
    ("col_sums", 8192, 768, 3072, {}, "a column reduction (W2's kind) at K below 4096"),
])
def test_everything_else_keeps_128(gpu, name, M, N, K, opts, why):
    v, note = _choose(name, M, N, K, **opts)
    assert v[0] == "sm90" and v[9] == 128 and "tile 128x128x64" in note, (why, v, note)


@pytest.mark.parametrize("w,M,N,K,schedule,bn", [
    ("R0", 8192, 3072, 768, "cooperative", 256),     # a plain store over 5.8 waves of 128 x 256 tiles
    ("R0", 4096, 4096, 4096, "cooperative", 256),    # 3.9 waves
    ("R0", 8192, 768, 3072, "ping-pong", 128),       # 1.5 waves: the last one's quantisation loses
    ("W1", 8192, 3072, 768, "ping-pong", 128),       # a bias and two outputs: measured no gain
    ("W3", 8192, 3072, 768, "ping-pong", 128),       # a row reduction: not measured wide
    ("W4", 4096, 4096, 4096, "cooperative", 256),    # a residual through the ring, row sums, K = 4096
    ("W4", 8192, 3072, 768, "cooperative", 128),     # the same at K = 768: measured no gain
    ("W3", 4096, 4096, 4096, "cooperative", 256),    # a row max at K = 4096: 216.7 against 222.1 us
    ("W1", 4096, 4096, 4096, "cooperative", 256),    # two outputs: 219.3 against 230.5 us (2026-12-07)
    ("W2", 4096, 4096, 4096, "cooperative", 256),    # a column sum: 234.0 against 244.1 us
])
def test_auto_tile_width_at_the_ladder_s_shapes(gpu, w, M, N, K, schedule, bn):
    from bench.ladder import LADDER
    p = evt_core.trace(LADDER[w].epilogue, LADDER[w].example(64, 64)).program
    b = _bound(p, M, N, K, a_mmajor=False)
    v, note = select.variant(b, 0x1000, 0x2000, False, True, "auto", p, PTRS, False, PTRS, "auto", fast_ops(p))
    assert v[9] == bn and f"{schedule} schedule" in note and f"tile 128x{bn}x64" in note, note


def test_wide_layout_rings_beside_the_panel_buffers():
    """48 KB slots beside the outputs' staging: a warpgroup's whole 64 x 256 slice (four 8 KB
    panels) where that leaves three slots (one output with a column vector, a row or a column
    reduction), else two 8 KB panel buffers its panels take in turn (32 KB an output), which
    puts two outputs beside three slots (none fit beside their whole 64 KB stagings). Asked for,
    a plain store recycles beside four slots (230,464 of the H200's 232,448 bytes with barriers
    and the alignment slack). Three outputs leave no ring of three."""
    for name, stages, panels in (("bare", 3, 4), ("row_sums", 3, 4), ("two_outputs", 3, 2), ("bias_gelu", 3, 4),
                                 ("row_col", 3, 4), ("col_sums", 3, 4)):
        lay = FragLayout(PROGRAMS[name], 256, False, False)
        assert lay.stages == stages and lay.fits and lay.total <= sm90.MAX_DYNAMIC_SHARED, (name, lay.total)
        assert lay.out_panels == panels and lay.out_bytes == 16384 * panels and lay.recycles == (panels == 2), name
        assert lay.outs == [stages * 49152 + lay.out_bytes * k for k in range(len(PROGRAMS[name].outputs))], name
        assert all(o % sm90.SWIZZLE_ALIGN == 0 for o in lay.outs), name
        assert (lay.scratch_bytes > 0) == (name == "col_sums"), name   # only column / whole-tile reductions
    recycled = FragLayout(PROGRAMS["bare"], 256, False, False, out_panels=2)
    assert recycled.stages == 4 and recycled.total == 230464
    assert not FragLayout(PROGRAMS["two_outputs"], 256, False, False, out_panels=4).stages >= 3
    assert FragLayout(PROGRAMS["three_outputs"], 256, False, False).stages < 3
    pp = FragLayout(PROGRAMS["bare"], 128, False, True)       # ping-pong stages its whole tile
    assert pp.out_panels == 2 and pp.out_bytes == 32768 and not pp.recycles
    assert select.sm90_wide_tile_fits(PROGRAMS["bare"], False, True, False)
    assert not select.sm90_wide_tile_fits(PROGRAMS["bare"], True, True, False)       # ping-pong
    assert not select.sm90_wide_tile_fits(PROGRAMS["bare"], False, False, False)      # staged epilogue


def test_wide_source():
    """The producer's stage is 48 KB and an N-major B four 64-column panels; tiles step 256
    columns; the wgmma is m64n256 with 128 accumulators; a warpgroup TMA-stores its four 8 KB
    panels as one bulk group; a column vector is loaded twice per thread (columns tid and tid +
    128) and both parked in the warpgroup's 1 KB slice."""
    p = PROGRAMS["bias_gelu"]
    src = sm90_source(p, "float16", False, False, False, False, False, False, True, fast_ops(p), bn=256)
    assert "mbar_expect_tx(fb, 49152)" in src and "sb = sa + 16384" in src and "n0 = nt * 256" in src
    assert [f"tma_load_2d(sb + {8192 * q}, tmB, n0 + {64 * q}, k0, fb)" in src for q in range(4)] == [True] * 4
    assert src.count("tma_load_2d(sb") == 4
    for c in range(4):
        assert f"tma_store_2d(tmO0, sbase + {3 * 49152 + 8192 * c} + wg * 32768, n0 + {64 * c}, m0w)" in src
    assert src.count("tma_store_2d(") == 4 and src.count("bulk_commit()") == 1
    assert "bv0 = ld_f32(in0_p, l * in0_sl + (n0 + tid) * in0_sn) if n0 + tid < N else ZERO" in src
    assert "bv0_1 = ld_f32(in0_p, l * in0_sl + (n0 + tid + 128) * in0_sn) if n0 + tid + 128 < N else ZERO" in src
    assert ", tid, bv0)" in src and ", tid + 128, bv0_1)" in src and "wg * 1024" in src
    assert src.count("epi_group(i64(") == 32                      # 32 column groups of 8
    assert module_prelude("float16", False, bn=256).startswith(
        f"from {ef.__package__}.ptx_sm90 import *\nwg_fence, wg_mma, wg_commit, wg_wait1, wg_wait0 = "
        "wgmma_ops(128, 'f16', False)\nacc_undef, wg_tie = undef_accumulators(128), accumulator_tie(128)")
    kmajor = sm90_source(p, "float16", True, False, False, False, False, False, True, fast_ops(p), bn=256)
    assert "tma_load_2d(sb, tmB, k0, n0, fb)" in kmajor              # one box of 256 rows of 64 k
    with pytest.raises(AssertionError):
        sm90_source(p, "float16", False, False, False, False, True, False, True, bn=256)      # ping-pong
    with pytest.raises(AssertionError):
        sm90_source(p, "float16", False, False, False, False, False, False, False, bn=256)    # staged


def test_wide_recycled_panels_are_stored_as_they_are_written():
    """Two outputs at 128 x 256 (W1's kind): each warpgroup's panel c of both outputs is staged in
    buffer c % 2 and TMA-stored as its own bulk group right after its 8 column groups, behind a
    barrier whose thread 0 first waited for the previous panel's stores to read their buffer."""
    p = PROGRAMS["two_outputs"]
    lay = FragLayout(p, 256, False, False)
    src = sm90_source(p, "float16", False, False, False, False, False, False, True, fast_ops(p), bn=256)
    groups = [src.index(f"epi_group(i64({j})") for j in range(32)]
    for k in range(2):
        stores = [src.index(f"tma_store_2d(tmO{k}, sbase + {lay.outs[k] + 8192 * (c % 2)} + wg * 16384, "
                            f"n0 + {64 * c}, m0w)") for c in range(4)]
        for c in range(4):      # panel c's stores after its 8 groups, before the next panel's
            assert groups[8 * c + 7] < stores[c] and (c == 3 or stores[c] < groups[8 * c + 8]), (k, c)
            assert src.rfind("bulk_wait_read0()", 0, stores[c]) > groups[8 * c + 7], (k, c)
            assert src.rfind("named_bar_sync(1 + wg, 128)", 0, stores[c]) > groups[8 * c + 7], (k, c)
    assert src.count("tma_store_2d(") == 8 and src.count("bulk_commit()") == 4
    assert "xo = (fg ^ (j & 7)) * 16 + ((j >> 3) & 1) * 8192" in src


def test_wide_pair_stores_cover_each_panel_once_in_its_buffer():
    """The address obase + const + xo a pair store hits at BN = 256 (cooperative): panel c of a
    warpgroup (its 64 rows, columns 64 c ..) in buffer c % 2, every 32-bit word of it exactly
    once, at the 128B swizzle's position of its (row, column); the two warpgroups' buffer pairs
    side by side, each buffer word written by two panels."""
    lay = FragLayout(PROGRAMS["bare"], 256, False, False, out_panels=2)
    seen = {}
    for wg in range(2):
        for tid in range(128):
            w, fg, fq = tid // 32, (tid % 32) // 4, tid % 4
            obase = wg * lay.out_panels * ef.PANEL_BYTES + (16 * w + fg) * 128 + 4 * fq
            for j in range(32):
                for r in range(2):
                    at = obase + r * 1024 + (fg ^ (j & 7)) * 16 + ((j >> 3) & 1) * ef.PANEL_BYTES
                    row, col = 16 * w + fg + 8 * r, 8 * j + 2 * fq
                    y, x = row, col % 64
                    buf = 2 * wg + (col // 64) % 2
                    want = buf * ef.PANEL_BYTES + y * 128 + (((x * 2) // 16) ^ (y % 8)) * 16 + x * 2 % 16
                    assert at == want, (wg, tid, j, r)
                    seen.setdefault((col // 64, at), []).append((wg, tid, j, r))
    assert all(len(v) == 1 for v in seen.values())
    for c in range(4):
        assert sorted(at for p, at in seen if p == c) == [a for a in range(0, lay.out_bytes, 4)
                                                          if (a // ef.PANEL_BYTES) % 2 == c % 2]


def test_wide_operand_maps():
    """A K-major B is one box of 256 rows of 64 k (TMA's largest box side); an N-major B and
    either A are the boxes of the 128-wide tile."""
    a, b = sm90.operand_maps(1, 300, 520, 200, (0, 200, 1), (0, 1, 200), True, 256)
    assert a == ((200, 300), (400,), (64, 128)) and b == ((200, 520), (400,), (64, 256))
    _, b = sm90.operand_maps(1, 300, 520, 200, (0, 200, 1), (0, 520, 1), False, 256)
    assert b == ((520, 200), (1040,), (64, 64))



@pytest.mark.parametrize("name,M,N,K,det", [
    ("w4", 8192, 3072, 768, False),      # the bench shape, where cupy's autotuner picks 128 x 256
    ("w4", 1000, 1000, 72, True),        # edge tiles, a K tail; deterministic row partials
    ("residual", 8192, 3072, 768, False),
    ("row_sums", 512, 512, 64, False),
    ("bare", 512, 512, 64, False),       # auto: 128 (K, tiles), forced: 256
    ("bare", 8192, 8192, 4096, False),   # auto: ping-pong; forced 256 under auto: cooperative
])
def test_forced_wide_tile(gpu, name, M, N, K, det):
    """sm90_tile_n=256 gives 128 x 256 tiles to every kind the kernel can run at that width,
    on any problem: W4's residual through the ring, row sums, under the cooperative schedule."""
    v, note = _choose(name, M, N, K, tile_n=256, det=det)
    assert v[0] == "sm90" and v[9] == 256 and not v[5] and v[7], (v, note)
    assert v[10] == bool(select.tile_inputs(PROGRAMS[name])) and not v[6], v     # (M, N) inputs: the ring
    assert "tile 128x256x64" in note and "not taken" not in note, note


@pytest.mark.parametrize("name,opts,why", [
    ("bare", {"schedule": "pingpong"}, "ping-pong"),
    ("bare", {"epilogue": "staged"}, "staged epilogue"),
    ("fp32_out", {}, "staged epilogue"),
    ("fp32_residual", {}, "copied by cp.async"),
    ("three_outputs", {}, "shared memory"),
])
def test_forced_wide_tile_falls_back_to_128_and_says_why(gpu, name, opts, why):
    v, note = _choose(name, 4096, 1024, 16384, tile_n=256, **opts)
    assert v[0] == "sm90" and v[9] == 128, (v, note)
    assert "tile 128x128x64 (sm90_tile_n=256 not taken: " in note and why in note, note


def test_forced_wide_tile_keeps_auto_s_ping_pong_where_cooperative_cannot_take_it(gpu):
    """sm90_tile_n=256 switches "auto"'s ping-pong to cooperative only where the cooperative kind
    runs 256-wide; elsewhere the schedule stays and the note gives the cooperative kind's reason."""
    auto, _ = _choose("three_outputs", 8192, 8192, 4096)
    v, note = _choose("three_outputs", 8192, 8192, 4096, tile_n=256)
    assert auto[5] and v[5] and v[9] == 128, (auto, v)
    assert "ping-pong schedule" in note and "not taken: shared memory" in note, note


def test_w4_wide_layout():
    """W4 at 128 x 256 with its residual through the ring: three 48 KB slots, the residual's
    eight panels in two of them after each tile's k-blocks (one left for the next tile's first
    k-block during the epilogue), its whole 64 KB output staging (recycling two panel buffers
    would leave 232,512 bytes for a fourth slot, 64 too many), 2 x 1 KB bias slices, no scratch
    (row sums combine in registers): 216,112 of the 232,448 bytes."""
    for det in (False, True):
        lay = FragLayout(PROGRAMS["w4"], 256, det, False, aux_ring=True)
        assert (lay.stages, lay.aux_stages, lay.aux_per_stage, lay.aux_groups) == (3, 2, 6, 8)
        assert lay.fits and lay.ring == 3 * 49152 and lay.outs == [3 * 49152] and not lay.aux
        assert lay.vecs == {0: 3 * 49152 + 65536} and lay.scratch_bytes == 0 and not lay.recycles
        assert lay.total == 216112 <= sm90.MAX_DYNAMIC_SHARED
    assert FragLayout(PROGRAMS["w4"], 256, False, False, 4, aux_ring=True, out_panels=2).total == 232512
    assert FragLayout(PROGRAMS["w4"], 256, False, False, 4, aux_ring=True).total > sm90.MAX_DYNAMIC_SHARED
    with pytest.raises(AssertionError):
        FragLayout(PROGRAMS["w4"], 256, False, False)       # copied rows are 128 wide


def test_tile_n_option_is_checked_and_reaches_select(gpu):
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    from evt_backends.numba_cuda.runner import Runner
    tree = evt_core.trace(_bare, {"accum": np.empty((64, 64), np.float32), **H})
    backend = NumbaCudaBackend()
    for bad in (512, "256", True, None):
        got = backend.supports(tree, {"sm90_tile_n": bad})
        assert not got and f"option sm90_tile_n={bad!r} is not one of ('auto', 128, 256)" in got.reason, got
    for ok in ("auto", 128, 256):
        assert backend.supports(tree, {"sm90_tile_n": ok})
    assert backend.options["sm90_tile_n"] == "auto"
    p = PROGRAMS["w4"]
    bound = _bound(p, 8192, 3072, 768)
    for opt, bn in (("auto", 128), (256, 256), (128, 128)):
        runner = Runner(p, {**backend.options, "sm90_tile_n": opt}, f"test-{opt}")
        assert runner.variant(bound, 0x1000, 0x2000, PTRS, PTRS)[9] == bn, opt


@pytest.mark.parametrize("name", ["two_outputs", "col_sums"])
def test_wide_two_outputs_and_column_sums_take_256_where_the_k_rule_says(gpu, name):
    """Two outputs (recycled panel staging) and column reductions ran at 128 x 256 on the H200
    (their GPU tests passed, and W1/W2 at 4096^3 were 4-5 % faster than at 128 x 128, 2026-12-07):
    sm90_tile_n=256 takes them; "auto" takes 256 at large K and keeps 128 at K < 4096."""
    v, note = _choose(name, 4096, 1024, 16384, tile_n=256)
    assert v[9] == 256 and "tile 128x256x64" in note and "cooperative schedule" in note, note
    v, note = _choose(name, 4096, 1024, 16384)
    assert v[9] == 256, note
    v, note = _choose(name, 8192, 3072, 768)
    assert v[9] == 128, note
