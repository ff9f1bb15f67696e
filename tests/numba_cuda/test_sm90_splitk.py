"""CPU checks of serial split-K in the sm_90a kernel (option split_k, codegen/splitk.py): which
calls split and into how many parts (select.sm90_splits, split_refusal), the generated source's
unit loop and fix-up, the SASS of split kernels, and the host side (grid, buffers, option).
Its results on a GPU: tests/gpu/test_numba_splitk.py::test_split_k."""
import os
import sys
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))

from evt_backends.numba_cuda import select  # noqa: E402
from evt_backends.numba_cuda.codegen.mainloop_sm90 import sm90_params, sm90_source  # noqa: E402
from evt_backends.gpu.fastmath import fast_ops  # noqa: E402
from test_sm90_wide_tile import PROGRAMS, PTRS, SMS, _bound, gpu  # noqa: E402,F401 - gpu: the fixture

SPLIT_KERNELS = {"split_bare": 64, "split_wide_mmajor_a_bare": 128, "split_col_sums_det": 64,
                 "split_staged_stats_batched": 64}     # name -> accumulators per thread


def _choose(name, M, N, K, split_k, schedule="auto", tile_n="auto", L=1):
    p = PROGRAMS[name]
    return select.variant(_bound(p, M, N, K, L), 0x1000, 0x2000, False, True, schedule, p, PTRS, False, PTRS,
                          "auto", fast_ops(p), True, tile_n, split_k)


@pytest.mark.parametrize("M,N,K,L,want", [
    (256, 2048, 16384, 1, 4),       # 32 tiles of 128 x 128 on 132 SMs: 4 splits fill one wave
    (128, 128, 65536, 1, 64),       # one tile: as many splits as the option allows
    (256, 352, 4096, 1, 16),        # 6 tiles, 64 k-blocks: splits of 4 k-blocks at least
    (256, 256, 16384, 3, 11),       # batches count: 12 tiles
    (256, 2048, 2048, 1, 1),        # K < 4096: never split
    (4096, 4096, 16384, 1, 1),      # 1024 tiles fill the GPU
])
def test_auto_takes_the_shared_rule(gpu, M, N, K, L, want):
    from evt_backends.gpu import splitk
    tiles = L * -(-M // 128) * -(-N // 128)
    assert splitk.split_count(tiles, K // 64, SMS) == want
    v, note = _choose("bare", M, N, K, "auto", L=L)
    assert v[0] == "sm90" and v[12] is (want > 1), (v, note)
    if want > 1:
        assert v[5] is False and "cooperative schedule" in note and f"serial split-K, {want} splits of K" in note
    else:
        assert "split" not in note, note


@pytest.mark.parametrize("K,splits,ns", [(16384, 8, 8), (200, 8, 4), (72, 4, 2), (64, 4, 1), (40, 2, 1), (4096, 1, 1)])
def test_a_count_runs_at_most_one_split_per_k_block(gpu, K, splits, ns):
    """ns = min(split_k, k-blocks): no split is empty; one k-block runs unsplit (the plain kernel)."""
    v, note = _choose("bare", 8192, 8192, K, splits)
    assert select.sm90_splits(_bound(PROGRAMS["bare"], 8192, 8192, K), splits) == ns
    assert v[12] is (ns > 1), (v, note)
    assert (f"serial split-K, {ns} splits of K" in note) is (ns > 1), note


def test_split_takes_the_cooperative_schedule_where_auto_would_take_ping_pong(gpu):
    v, _ = _choose("two_outputs", 8192, 8192, 1024, 1)
    assert v[5] is True and v[12] is False
    v, note = _choose("two_outputs", 8192, 8192, 1024, 2)
    assert v[5] is False and v[11] is False and v[12] is True and "cooperative schedule" in note, note


@pytest.mark.parametrize("name,schedule,why", [
    ("bare", "pingpong", "sm90_schedule='pingpong': split-K runs on the cooperative schedule only"),
    ("bias_gelu", "overlap", "sm90_schedule='overlap': split-K runs on the cooperative schedule only"),
    ("residual", "auto", "the epilogue reads (M, N) inputs"),
    ("w4", "cooperative", "the epilogue reads (M, N) inputs"),
])
def test_refusals_run_unsplit_and_say_why(gpu, name, schedule, why):
    v, note = _choose(name, 256, 2048, 16384, 4, schedule)
    assert v[0] == "sm90" and v[12] is False, (v, note)
    assert f"split_k not taken ({why}" in note, note
    if schedule == "pingpong":
        assert v[5] is True


@pytest.mark.parametrize("name", ["bare", "row_sums", "col_sums", "bias_gelu", "row_col"])
def test_split_takes_any_cooperative_tile_width(gpu, name):
    for tile_n in (128, 256):
        v, note = _choose(name, 256, 2048, 16384, 4, tile_n=tile_n)
        assert v[12] is True, (v, note)
        assert v[9] == tile_n or "sm90_tile_n=256 not taken" in note, note


def test_the_runner_passes_the_option(gpu):
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    from evt_backends.numba_cuda.runner import Runner
    p = PROGRAMS["bare"]
    b = _bound(p, 256, 2048, 16384)
    for opt, split in ((1, False), (4, True), ("auto", True)):
        runner = Runner(p, {**NumbaCudaBackend.options, "split_k": opt, "sm90": True}, f"test-split-{opt}")
        assert runner.variant(b, 0x1000, 0x2000, PTRS, PTRS)[12] is split, opt


def test_option_values_are_checked():
    import evt_core
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    tree = evt_core.trace(lambda accum: {"D": accum}, {"accum": np.empty((4, 4), np.float32),
                                                        "D": np.empty((4, 4), np.float16)})
    backend = NumbaCudaBackend()
    assert backend.options["split_k"] == 1
    for bad in (0, 65, "4", True, 2.0, None, "off"):
        got = backend.supports(tree, {"split_k": bad})
        assert not got and f"option split_k={bad!r} is not an int from 1 to 64 or 'auto'" in got.reason, got
    for ok in (1, 2, 64, "auto"):
        assert backend.supports(tree, {"split_k": ok})


# ---- source --------------------------------------------------------------------------------------

def _source(name, split, **kw):
    p = PROGRAMS[name]
    return sm90_source(p, "float16", False, False, False, False, frag=True, split=split, **kw)


def test_split_source_loops_over_units_and_fixes_up_before_the_epilogue():
    src = _source("col_sums", True)
    head = src[src.index("def evt_kernel("):].split("\n", 1)[0]
    assert head.endswith("tiles_m, tiles_n, splits, skw, skc):"), head
    assert src.count("while u < units:") == 2 and "units = tiles * splits" in src     # producer, consumers
    assert src.count("for kb in range(kb0, kb1):") == 2 and "for kb in range(ktiles)" not in src
    assert src.count("sp = udiv32(u, tiles)") == 2 and src.count("kb1 = udiv32((sp + 1) * ktiles, splits)") == 2
    assert ", kb - kb0)" in src and ", kb)" not in src       # scale_d 0 on the unit's first k-block only
    assert src.count("u = u + cuda.gridDim.x") == 2
    # the fix-up: store, fence, barrier, arrival; the last split sums in split order, then the epilogue
    order = ["acc = wg_wait0(acc)", "if splits > 1:", "sk_store(acc, skp)", "cuda.threadfence()",
             "named_bar_sync(1 + wg, 128)", "last = sk_arrive(", "acc = sk_zero(acc)", "for o in range(splits):",
             "acc = sk_add(acc, skr + o * 32768)", "\n            if last:\n", "tma_store_2d(tmO0"]
    at = [src.index(x) for x in order]
    assert at == sorted(at), list(zip(order, at))
    # every line of the epilogue is inside `if last:`, up to the step to the next unit
    lines = src.split("\n")
    first = lines.index("            if last:")
    end = lines.index("            u = u + cuda.gridDim.x")
    assert end - first > 20 and all(x.startswith("                ") for x in lines[first + 1:end])


def test_split_slot_stride_follows_the_tile_width():
    p = PROGRAMS["bare"]
    src = sm90_source(p, "float16", False, False, False, False, frag=True, bn=256, split=True)
    assert "* splits + sp) * 16384 + tid) * 4" in src and "skr + o * 65536" in src


@pytest.mark.parametrize("name", ["bare", "col_sums", "row_col"])
def test_non_split_source_has_none_of_it(name):
    src = _source(name, False)
    for x in ("units", "splits", "kb0", "sk_", "skw", "skc", "if last:"):
        assert x not in src, x
    assert [q.name for q in sm90_params(PROGRAMS[name], True)] == [q.name for q in sm90_params(PROGRAMS[name], True,
                                                                                               False, False)]
    assert [q.name for q in sm90_params(PROGRAMS[name], True, False, True)][-3:] == ["splits", "skw", "skc"]


@pytest.mark.parametrize("kw", [{"pingpong": True}, {"overlap": True, "aux_ring": False}])
def test_split_source_refuses_other_schedules(kw):
    with pytest.raises(AssertionError):
        _source("bare", True, **kw)


def test_split_source_refuses_tile_inputs():
    with pytest.raises(AssertionError):
        sm90_source(PROGRAMS["residual"], "float16", False, False, False, False, frag=True, aux_ring=True,
                    split=True)


# ---- SASS ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def split_sass(tmp_path_factory):
    from sm90_kernels import build, require_build_tools
    require_build_tools(tmp_path_factory, "cache-sm90-splitk")
    from evt_backends.numba_cuda.runtime.build import sass_opcodes
    return {name: (build(name), sass_opcodes(build(name).image, modifiers=True)) for name in SPLIT_KERNELS}


@pytest.mark.parametrize("name", sorted(SPLIT_KERNELS))
def test_split_sass_has_one_arrival_and_coalesced_partials(split_sass, name):
    """One counter atomic (atom.inc, which also resets it), one barrier reduction handing "last"
    to the warpgroup, n_acc partial stores and n_acc L2 loads (the summing loop over the splits
    is not unrolled), two gpu-scope fences; wgmma, no local memory, no CALL (the u32 unit
    arithmetic), 168 registers (test_sm90_codegen checks the rest of every kernel)."""
    built, ops = split_sass[name]
    n_acc = SPLIT_KERNELS[name]
    assert ops["ATOMG.E.INC.STRONG.GPU"] == 1, ops
    assert ops["BAR.RED.OR.DEFER_BLOCKING"] == 1, ops
    assert ops["LDG.E.STRONG.GPU"] == n_acc, ops
    assert ops["STG.E"] >= n_acc, ops
    assert ops["MEMBAR.SC.GPU"] == 2, ops
    assert sum(v for k, v in ops.items() if k.startswith("HGMMA.")) >= 4, ops
    assert not any(k.startswith(("LDL", "STL", "CALL")) for k in ops), ops
    assert "0 bytes spill stores" in built.ptx and "Used 168 registers" in built.ptx, built.ptx


# ---- host ----------------------------------------------------------------------------------------

def test_grid_covers_the_units_and_keeps_the_partial_slots(monkeypatch):
    from evt_backends.numba_cuda.runtime import launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: SMS)
    b = SimpleNamespace(L=1, M=256, N=2048, K=16384)
    g1, _, part1 = launch_sm90.grid(b, False, 128)
    g4, _, part4 = launch_sm90.grid(b, False, 128, 4)
    assert g1 == (32, 1, 1) and g4 == (128, 1, 1) and part1 == part4
    assert launch_sm90.grid(b, False, 128, 64)[0] == (SMS, 1, 1)


def test_split_buffers_grow_keep_the_old_ones_and_zero_counters_once(monkeypatch):
    from evt_backends.numba_cuda.runtime import driver, launch_sm90
    made, zeroed = [], []

    class Buf:
        def __init__(self, nbytes):
            self.nbytes, self.ptr = nbytes, 0x100000 * (len(made) + 1)
            made.append(self)
    monkeypatch.setattr(driver, "DeviceBuffer", Buf)
    monkeypatch.setattr(driver, "memset32", lambda ptr, word, n, stream: zeroed.append((ptr, word, n, stream)))
    sb = launch_sm90.SplitBuffers()
    small = SimpleNamespace(L=1, M=256, N=256, K=16384)      # 4 tiles
    v = sb.pointers(small, 128, 8, 7, False)
    assert v == [8, made[0].ptr, made[1].ptr] and made[0].nbytes == 4 * 4 * 8 * 2 * 128 * 64
    assert made[1].nbytes == 8 * 4 and zeroed == [(made[1].ptr, 0, 8, 7)]
    assert sb.pointers(small, 128, 4, 7, False) == [4, made[0].ptr, made[1].ptr] and len(zeroed) == 1
    big = SimpleNamespace(L=1, M=1024, N=256, K=16384)       # 16 tiles: must grow
    assert sb.pointers(big, 128, 8, 7, True) is None and len(made) == 2       # not inside a capture
    v = sb.pointers(big, 128, 8, 7, False)
    assert v == [8, made[2].ptr, made[3].ptr] and sb.old == [(made[0], made[1])] and len(zeroed) == 2
