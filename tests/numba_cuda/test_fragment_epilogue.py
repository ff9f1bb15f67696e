"""CPU checks of the sm_90a fragment epilogue (codegen/epilogue_fragment.py): which calls take it
(select.sm90_fragment and the schedule rule beside it), its shared-memory layout, the swizzled
panel addresses its pair stores hit, and the order of its TMA-store protocol in the generated
source. Its SASS is checked in test_sm90_codegen.py; its results on the H200 in
tests/gpu/test_numba_sm90.py."""
import os
import sys
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import evt_core  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from evt_backends.gpu import sm90  # noqa: E402
from evt_backends.gpu.fastmath import chosen_fast_ops, fast_ops  # noqa: E402
from evt_backends.numba_cuda import select  # noqa: E402
from evt_backends.numba_cuda.codegen import epilogue_fragment as ef  # noqa: E402
from evt_backends.numba_cuda.codegen.frag_layout import FragLayout, column_vectors  # noqa: E402
from evt_backends.numba_cuda.codegen.mainloop_sm90 import sm90_source  # noqa: E402


def _program(w):
    return evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program


def _bound(p, M=4096, N=3072, out_sm=None, in_sm=None):
    """A bound call of program p: dense (M, N) outputs and inputs, row strides as given."""
    def tensor(op, sm):
        s = p.spans(op)
        return SimpleNamespace(strides=(0, (N if sm is None else sm) if s[1] else 0, 1 if s[2] else 0))
    return SimpleNamespace(L=1, M=M, N=N, K=768, dtype="float16", a_strides=(0, 768, 1), b_strides=(0, N, 1),
                           outputs=[tensor(t, out_sm) for t in p.outputs], inputs=[tensor(t, in_sm) for t in p.inputs])


PTRS = [0x10000 * (k + 1) for k in range(8)]


@pytest.mark.parametrize("w,pingpong,expected", [
    ("R0", True, True), ("W3", True, True),
    ("W1", True, True),            # its tanh reaches only 16-bit stores: spelled tanh.approx
    ("W2", False, True), ("W4", False, True),          # (M, N) input staged in the cooperative schedule
    ("W2", True, False), ("W4", True, False),          # ping-pong has no input buffers
])
def test_which_workloads_take_the_fragment_epilogue(w, pingpong, expected):
    from bench.ladder import LADDER
    p = evt_core.trace(LADDER[w].epilogue, LADDER[w].example(64, 64)).program
    b = _bound(p)
    assert select.sm90_fragment(b, p, PTRS, PTRS, pingpong, False, fast=fast_ops(p)) is expected


def test_libdevice_transcendentals_without_a_reduction_stay_staged():
    p = _program("W1")
    b = _bound(p)
    assert not select.sm90_fragment(b, p, PTRS, PTRS, True, False, fast=())            # fast_math=False
    assert select.sm90_fragment(b, p, PTRS, PTRS, True, False, measured=False, fast=())  # sm90_epilogue="fragment"


def test_outputs_the_tma_cannot_store_take_the_staged_epilogue():
    p = _program("W3")
    assert not select.sm90_fragment(_bound(p, out_sm=3076), p, PTRS, PTRS, True, False)     # 6152-byte rows: no 16 B multiple
    assert not select.sm90_fragment(_bound(p), p, PTRS, [0x10008] * 4, True, False)        # misaligned base
    assert select.sm90_fragment(_bound(p, out_sm=3080), p, PTRS, PTRS, True, False)
    w4 = _program("W4")
    assert not select.sm90_fragment(_bound(w4, in_sm=3076), w4, PTRS, PTRS, False, False)  # input rows not 16 B


def test_refusals_name_the_tensor():
    import numpy as np
    from evt_core import ops
    tree = evt_core.trace(lambda accum: {"D": accum, "S": ops.sum(accum, over="L")},
                          {"accum": np.empty((2, 8, 8), np.float32), "D": np.empty((2, 8, 8), np.float32),
                           "S": np.empty((8, 8), np.float32)})
    assert "'D' is float32" in ef.refusal(tree.program)


def test_auto_schedule_takes_ping_pong_unless_the_epilogue_loads_per_row(monkeypatch):
    from evt_backends.numba_cuda.runtime import driver, launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(driver, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(select, "encode_maps", lambda *a: b"")
    for w, schedule in (("W1", "ping-pong"), ("W2", "cooperative"), ("W3", "ping-pong"), ("W4", "cooperative")):
        p = _program(w)
        b = _bound(p, M=8192)
        v, note = select.variant(b, 0x1000, 0x2000, False, True, "auto", p, PTRS, False, PTRS, "auto", fast_ops(p))
        assert v[7] and f"{schedule} schedule" in note, (w, note)


def test_layout_fits_and_keeps_three_slots_for_the_workloads():
    for w, pp in (("W1", False), ("W1", True), ("W2", False), ("W3", True), ("W4", False)):
        p = _program(w)
        lay = FragLayout(p, 128, False, pp)
        assert lay.fits and lay.stages >= 3, (w, lay.stages, lay.total)
        assert all(off % sm90.SWIZZLE_ALIGN == 0 for off in lay.outs), w      # TMA panels: 1024-aligned
        assert lay.total <= sm90.MAX_DYNAMIC_SHARED


def test_pair_stores_cover_each_swizzled_panel_once_without_bank_conflicts():
    """The address obase + const + xo[j % 8] a pair store hits (epilogue_fragment._pair): every
    32-bit word of the four 64 x 64 panels exactly once over a ping-pong tile, at the 128B
    swizzle's position of its (row, column); a warp's 32 stores of one pair hit 32 banks."""
    seen = {}
    for tid in range(128):
        w, fg, fq = tid // 32, (tid % 32) // 4, tid % 4
        obase = (16 * w + fg) * 128 + 4 * fq
        for h in range(2):
            for j in range(16):
                for r in range(2):
                    at = obase + 2 * h * ef.PANEL_BYTES + (j // 8) * ef.PANEL_BYTES + r * 1024 + (fg ^ (j % 8)) * 16
                    row, col = 64 * h + 16 * w + fg + 8 * r, 8 * j + 2 * fq
                    panel = (row // 64) * 2 + col // 64
                    y, x = row % 64, col % 64
                    want = panel * ef.PANEL_BYTES + y * 128 + (((x * 2) // 16) ^ (y % 8)) * 16 + (x * 2) % 16
                    assert at == want, (tid, h, j, r)
                    seen.setdefault(at, []).append((tid, h, j, r))
    assert sorted(seen) == list(range(0, 4 * ef.PANEL_BYTES, 4))
    for h, j, r in ((0, 0, 0), (1, 13, 1)):
        banks = {((16 * 0 + fg) * 128 + 4 * fq + (fg ^ (j % 8)) * 16) // 4 % 32 for fg in range(8) for fq in range(4)}
        assert len(banks) == 32


def test_generated_protocol_orders_the_stores():
    """In the source: the output maps are acquired before the tile loop, the staging is fenced
    for the async proxy and synchronised before the one thread issues the stores, ping-pong hands
    the staging over only after the stores have read it, and the consumer waits for its stores
    before it exits."""
    p = _program("W3")
    src = sm90_source(p, "float16", False, False, False, False, True, False, True)
    assert "sts_pair_f16(ob0" in src.split("def evt_kernel")[0]     # the pair function stores the pairs
    order = ["# ---- consumer warpgroups", "tensormap_acquire(tmO0)", "while tile < tiles:",
             "named_bar_sync(5 + wg, 256)", "epi_group(", "fence_proxy_async()",
             "named_bar_sync(1 + wg, 128)   # every pair", "tma_store_2d(tmO0", "bulk_commit()", "bulk_wait_read0()",
             "named_bar_arrive(6 - wg, 256)", "bulk_wait0()"]
    at = 0
    for x in order:                       # each after the previous one
        at = src.index(x, at)
    assert src.count("tma_store_2d(tmO0") == 4            # two 64-row halves x two 64-column panels
    coop = sm90_source(_program("W4"), "float16", False, False, False, False, False, True, True)
    body = coop.split("# ---- consumer warpgroups")[1]
    assert body.index("cp_async_wait_0()") < body.index("bulk_wait_read0()") < body.index("epi_group(")


@pytest.mark.parametrize("w,pingpong", [("W1", False), ("W1", True), ("W4", False)])
def test_column_vector_slices_per_warpgroup_in_the_layout(w, pingpong):
    """A column vector's tile slice: bn fp32 values per consumer warpgroup (both schedules), 8-byte
    aligned for the pair loads, between the other regions and overlapping none of them."""
    p = _program(w)
    lay = FragLayout(p, 128, False, pingpong)
    vecs = column_vectors(p)
    assert vecs and sorted(lay.vecs) == vecs and lay.vec_bytes == 4 * 128
    regions = [(0, lay.ring)] + [(o, o + lay.out_bytes) for o in lay.outs]
    regions += [(o, o + 2 * size) for o, size in lay.aux.values()]
    regions += [(o, o + 2 * lay.vec_bytes) for o in lay.vecs.values()]
    regions += [(lay.scratch, lay.scratch + 2 * lay.scratch_bytes), (lay.bars, lay.used)]
    regions.sort()
    assert all(a[1] <= b[0] for a, b in zip(regions, regions[1:])), regions
    assert all(o % 8 == 0 for o in lay.vecs.values())
    assert lay.fits and lay.stages >= 3


@pytest.mark.parametrize("w,pingpong", [("W1", False), ("W1", True), ("W4", False)])
def test_column_vector_staged_once_per_tile_in_the_source(w, pingpong):
    """The vector's global load at the tile's start, before the mainloop; its store into the
    warpgroup's slice in the epilogue before the barrier that publishes it (ping-pong: a barrier
    of its own, after the staging hand-over) and before the first group; the group function
    reads a pair with one 64-bit shared load and touches global memory no more."""
    p = _program(w)
    aux = bool(ef.tile_inputs(p))
    src = sm90_source(p, "float16", False, False, False, False, pingpong, aux, True, fast_ops(p))
    group = src.split("def epi_group")[1].split("\ndef ")[0]
    assert "lds_f32x2(vrow0 + 4 * c)" in group and "ld_f16(" not in group and "ld_f32(" not in group
    body = src.split("# ---- consumer warpgroups")[1]
    load = body.index("bv0 = ld_f16(in0_p, l * in0_sl + (n0 + tid) * in0_sn) if n0 + tid < N else ZERO")
    assert load < body.index("for kb in range(ktiles)") < body.index("sts(sbase + ")
    at = body.index("sts(sbase + ")
    if pingpong:
        assert body.index("named_bar_sync(5 + wg, 256)") < at
        publish = body.index("named_bar_sync(1 + wg, 128)   # the tile's column vectors", at)
    else:
        publish = body.index("named_bar_sync(1 + wg, 128)\n", at)
    assert publish < body.index("epi_group(") and body.count("bv0 = ") == 1


def test_fp32_targets_take_the_fragment_epilogue_read_as_pairs():
    """XML-CNN's U-turn forward (trees.bce_uturn): its fp32 (M, N) targets are staged by cp.async
    in the cooperative schedule and read a column pair per 64-bit shared load; ping-pong has no
    input buffers. The layout keeps a ring of three slots beside 2 x 34 KB of fp32 rows.
    "auto" takes it with fast_math=True's approximations, not with exact libdevice math."""
    from trees import case
    p = case("bce_uturn", 0, 13, 11, 9)[0].program
    assert ef.refusal(p) is None
    b = _bound(p, M=2048, N=4096)
    fast = chosen_fast_ops(p, True)                # fast_math=True: exp, log, sigmoid by MUFU
    assert select.sm90_fragment(b, p, PTRS, PTRS, False, False, fast=fast)
    assert not select.sm90_fragment(b, p, PTRS, PTRS, True, False, fast=fast)
    # "auto" keeps them exact (they reach fp32 sums): measured faster staged, unless forced
    assert not select.sm90_fragment(b, p, PTRS, PTRS, False, False, fast=fast_ops(p))
    assert select.sm90_fragment(b, p, PTRS, PTRS, False, False, measured=False, fast=fast_ops(p))
    lay = FragLayout(p, 128, False, False)
    assert lay.fits and lay.stages >= 3 and list(lay.aux) == [1], (lay.stages, lay.aux)
    group = ef._Writer(p, lay, ["acc"], False).group_function()
    assert group.count("lds_f32x2(abuf1 + 4 * (arow") == 2 and "lds(abuf1" not in group


def test_fp32_pair_reads_of_a_staged_row_are_bank_conflict_free():
    """A 64-bit shared load is served per half-warp: lanes 4 fg + fq (fg = 0..3 or 4..7) read
    words (16 w + fg) * AUX_PITCH + 2 fq + 8 j and the next, which must cover 32 distinct banks."""
    for w in range(4):
        for j in range(16):
            for half in (range(0, 16), range(16, 32)):
                banks = []
                for lane in half:
                    fg, fq = lane // 4, lane % 4
                    word = (16 * w + fg) * ef.AUX_PITCH + 2 * fq + 8 * j
                    banks += [word % 32, (word + 1) % 32]
                assert len(set(banks)) == 32, (w, j, sorted(banks))


def _run_lanes(source, name, lanes, **args):
    """Run a generated device function's straight-line body for the 32 lanes of a warp at once:
    each variable a NumPy array over lanes, select_f32 np.where, a xor shuffle an index
    permutation, sts a scatter into the returned dict."""
    from types import SimpleNamespace
    import numpy as np
    body = source[source.index(f"def {name}("):].split("\n")[1:]
    code = "\n".join(line[4:] for line in body if line.startswith("    ") and "return" not in line)
    scratch = {}

    def sts(_, at, v):
        for lane in range(32):
            scratch[int(at[lane])] = float(v[lane])
    shfl = SimpleNamespace(shfl_xor_sync=lambda mask, v, xor: v[lanes ^ xor])
    exec(code, {"cuda": shfl, "sts": sts, "max_nan": np.fmax,
                "select_f32": lambda c, a, b: np.where(c != 0, a, b), **args})
    return scratch


@pytest.mark.parametrize("bn", [128, 256])
def test_column_reduce_scatter_parks_every_column_s_sum_over_the_quads(bn):
    """epi_col<k>'s reduce-scatter: lane 4 fg + fq's partial 2 j + e belongs to column
    8 j + 2 fq + e; after it, the scratch word w * bn + column holds that column's sum over the
    warp's 8 quads, for every column, each written once."""
    import numpy as np
    p = evt_core.trace(lambda accum: {"D": accum, "S": evt_core.ops.sum(accum, over="M")},
                       {"accum": np.empty((64, 64), np.float32), "D": np.empty((64, 64), np.float16),
                        "S": np.empty(64, np.float32)}).program
    from evt_backends.numba_cuda.codegen.warp_combine import column_functions
    src = column_functions(p, SimpleNamespace(bn=bn))
    lanes = np.arange(32)
    fg, fq = lanes // 4, lanes % 4
    rng = np.random.default_rng(0)
    n = 2 * (bn // 8)
    parts = rng.integers(-1000, 1000, size=(n, 32)).astype(np.float64)    # exact sums in any order
    w = 2
    got = _run_lanes(src, "epi_col0", lanes, fg=fg, scratch=None, wcol=w * bn + 2 * fq,
                     **{f"v{i}": parts[i] for i in range(n)})
    want = {}
    for i in range(n):
        for lane in range(32):
            col = 8 * (i // 2) + 2 * fq[lane] + i % 2
            want[w * bn + col] = want.get(w * bn + col, 0.0) + parts[i, lane]
    assert got == want and len(got) == bn
    assert src.count("shfl_xor_sync") == n // 2 + n // 4 + n // 8
