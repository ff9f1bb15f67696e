"""CPU-only checks of the sm_90a kernel: the SASS of representative kernels (numba builds them
through LTO-IR for sm_90a, nvJitLink links, the cuobjdump wheel disassembles), the shared
geometry in backends/gpu/sm90.py, and which calls fall back to the mma.sync kernel."""
import os
import sys
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from evt_backends.gpu import sm90  # noqa: E402

KERNELS = ("bare", "bias_gelu", "reductions_aux_two_outputs", "means_batched", "pingpong_bias_gelu",
           "pingpong_reductions", "staged_dgelu", "frag_pingpong_bias_relu", "frag_pingpong_ffn_gelu_fast",
           "frag_stats_det", "mmajor_a_bias_gelu", "frag_pingpong_mmajor_a", "frag_bce_uturn", "frag_ffn_gelu_fast",
           "wide_bare", "wide_mmajor_a_bare", "wide_bias_gelu", "frag_ring_layernorm_stats",
           "frag_ring_two_inputs_batched", "wide_ring_layernorm_stats", "wide_ffn_relu_two_outputs",
           "wide_bias_col_sums", "overlap_gelu_backward", "overlap_layernorm_stats", "overlap_ffn_gelu",
           "overlap_two_inputs_batched", "split_bare", "split_wide_mmajor_a_bare", "split_col_sums_det",
           "split_staged_stats_batched")


# Known spills, kept from growing (none now: the ping-pong fragment epilogue's column vector,
# loaded per column group from global memory beside its 128 accumulators, spilled 5 registers
# until it was staged per tile in shared memory).
SPILL_BUDGET = {}

# CALLs into ptxas's slow path of the IEEE fp32 reciprocal (rcp.rn: a subroutine behind a branch,
# taken for denormal or huge divisors only), one per element of a consumer's 64: the exact
# sigmoid of values that reach an fp32 reduction. Any other CALL (an int64 division helper, a
# device function left out of line) fails the check.
RCP_SLOW_PATH_CALLS = {"frag_bce_uturn": 64}


@pytest.fixture(scope="module")
def sass(tmp_path_factory):
    from sm90_kernels import build, require_build_tools
    require_build_tools(tmp_path_factory, "cache-sm90")
    from evt_backends.numba_cuda.runtime.build import sass_opcodes
    return {name: (build(name), sass_opcodes(build(name).image)) for name in KERNELS}


@pytest.mark.parametrize("name", KERNELS)
def test_sass_is_warp_specialised_wgmma_with_tma(sass, name):
    from evt_backends.numba_cuda.runtime.build import sass_listing, sass_opcodes
    built, ops = sass[name]
    frags = 2 if "pingpong" in name else 1
    bn = 256 if "wide" in name else 128
    assert ops["HGMMA"] >= frags * sm90.K16_STEPS, ops   # 4 x m64nBNk16 per k-block and fragment
    shapes = {k.split(".")[1] for k in sass_opcodes(built.image, modifiers=True) if k.startswith("HGMMA.")}
    assert shapes == {f"64x{bn}x16"}, shapes           # every wgmma at the variant's tile width
    assert ops["UTMALDG"] >= 2, ops                   # A and B by TMA
    if name.startswith("staged") or name in ("frag_stats_det", "frag_bce_uturn"):
        assert ops["LDGSTS"] >= 1, ops                # the (M, N) input by cp.async
    if "ring" in name:
        assert ops["LDGSTS"] == 0 and ops["UTMALDG"] >= 3, ops   # the (M, N) inputs by TMA, into the ring
    if name.startswith(("frag", "overlap")):
        assert ops["UTMASTG"] >= 2, ops               # the fragment epilogue's outputs by TMA stores
    assert ops["USETMAXREG"] == 2, ops                # producer dec + consumer inc survived the build
    # no accumulator zeroing (a tile's first wgmma has scale_d 0): zeroing one fragment's 64 fp32
    # registers takes 32 CS2R Rx, SRZ (the other CS2R read the watchdogs' %globaltimer)
    zeroing = [x for x in sass_listing(built.image, operands=True) if x.startswith("CS2R") and "SRZ" in x]
    assert len(zeroing) < 32, zeroing
    assert ops["CALL"] == RCP_SLOW_PATH_CALLS.get(name, 0), ops   # no int64 division helpers, everything inlined
    if name in SPILL_BUDGET:
        assert ops["LDL"] <= SPILL_BUDGET[name] and ops["STL"] <= SPILL_BUDGET[name], ops
        return
    assert ops["LDL"] == 0 and ops["STL"] == 0, ops   # no local memory
    assert "0 bytes spill stores" in built.ptx and "Used 168 registers" in built.ptx, built.ptx


@pytest.mark.parametrize("name,ldg", [("frag_pingpong_bias_relu", 1), ("frag_stats_det", 3)])
def test_fragment_column_vector_is_loaded_once_per_tile(sass, name, ldg):
    """A column vector (bias) is one global load per thread and tile (then stored to the
    warpgroup's shared slice) and a 64-bit shared load per column group: 32 predicated global
    loads before. frag_stats_det's other two are its row vector's, one per fragment row."""
    _, ops = sass[name]
    assert ops["LDG"] == ldg, ops
    assert ops["LDS"] >= 16, ops          # (an LDS.64 per column group)


def test_wide_ring_layernorm_stats_reads_its_panels_and_combines_rows_as_at_128(sass):
    """W4 at 128 x 256 (sm90_tile_n=256): the residual's eight 64 x 64 panels are eight TMA loads
    beside wide_bare's A and B loads; the epilogue reads a packed pair per fragment row and
    column group plus the bias's LDS.64 per group, twice the 128-wide kernel's 48 over twice the
    columns; the two row sums combine as at 128 (the same quad shuffles, one atomic per
    reduction and fragment row)."""
    _, wide = sass["wide_ring_layernorm_stats"]
    _, narrow = sass["frag_ring_layernorm_stats"]
    _, bare = sass["wide_bare"]
    assert wide["UTMALDG"] - bare["UTMALDG"] == 8, (wide, bare)
    assert wide["LDS"] == 2 * narrow["LDS"] == 96, (wide, narrow)
    assert wide["SHFL"] == narrow["SHFL"] and wide["REDG"] == narrow["REDG"] == 4, (wide, narrow)
    assert wide["UTMASTG"] == 4 and wide["LDGSTS"] == 0, wide    # four 64-column store panels


def test_fast_erf_gelu_is_one_ex2_per_element_without_erff(sass):
    """fast_math="auto" spells an fp16-only erf GELU as gpu/fastmath.py's polynomial around one
    ex2.approx: one MUFU per element of the consumer's 64 (plus the kernel's few others), and
    none of libdevice erff's coefficient selects (about 8 FSEL per element)."""
    _, ops = sass["frag_ffn_gelu_fast"]
    assert 64 <= ops["MUFU"] <= 72 and ops["FSEL"] < 64, ops


@pytest.mark.parametrize("name,pieces", [("overlap_gelu_backward", 8), ("overlap_layernorm_stats", 8),
                                         ("overlap_ffn_gelu", 8), ("overlap_two_inputs_batched", 8)])
def test_overlapped_epilogue_runs_under_the_next_tiles_wgmma(sass, name, pieces):
    """consumer_overlap: the first tile's k-loop, one wgmma group per epilogue piece (8: their
    ring inputs are read up front and their slots released, so the ring does not bound them),
    then the next tile's remaining k-loop, without spills beside the 32-64 preloaded input words
    and the second accumulator set (test_sass_is_warp_specialised_wgmma_with_tma). ptxas keeps each piece's
    arithmetic between its wgmma group's issue and its wait (a wait hoisted above the piece
    would serialise them again); the cooperative kernel of the same kind waits right after
    every issue."""
    from evt_backends.numba_cuda.codegen.consumer_overlap import pieces as n_pieces
    from evt_backends.numba_cuda.codegen.frag_layout import FragLayout
    from bench.nvcc_check import work_under_wgmma
    from evt_backends.numba_cuda.runtime.build import sass_listing
    from sm90_kernels import programs
    built, ops = sass[name]
    lay = FragLayout(programs()[name][0], 128, False, False, aux_ring=programs()[name][12])
    assert n_pieces(lay) == pieces, (lay.stages, lay.aux_stages)
    assert ops["HGMMA"] >= sm90.K16_STEPS * (pieces + 2), ops     # (LLVM may peel a k-loop's first trip)
    work = work_under_wgmma(sass_listing(built.image))
    assert sum(w >= 40 for w in work) == pieces, work
    assert max(work_under_wgmma(sass_listing(sass["frag_ring_layernorm_stats"][0].image))) < 40


def test_second_build_comes_from_the_cache(sass):
    from evt_backends.numba_cuda.runtime import build as nb
    from sm90_kernels import build
    before = nb.COMPILES["count"]
    nb._memory.clear()
    import sm90_kernels
    sm90_kernels._built.clear()
    again = build("bare")
    assert nb.COMPILES["count"] == before and again.image == sass["bare"][0].image


def test_fragment_staging_matches_the_wgmma_fragment():
    """The staging indices of codegen/epilogue_sm90 (fr + 8j, fr + 8 pitch + 8j, then +1) put every
    accumulator of every thread at its fragment position, covering the 64 x 128 block once (the
    staged epilogue runs 128-wide tiles only: select.sm90_wide_tile_fits)."""
    from evt_backends.numba_cuda.codegen.epilogue_sm90 import staging_pitch
    bn = 128
    pitch, seen = staging_pitch(bn), set()
    for warp in range(4):
        for lane in range(32):
            fr = (16 * warp + lane // 4) * pitch + 2 * (lane % 4)
            for i in range(bn // 2):
                j, e = divmod(i, 4)
                idx = fr + 8 * j + (8 * pitch if e >= 2 else 0) + e % 2
                row, col = sm90.fragment_position(i, warp, lane)
                assert idx == row * pitch + col
                seen.add((row, col))
    assert seen == {(r, c) for r in range(64) for c in range(bn)}


@pytest.mark.parametrize("mtiles,ntiles,L", [(1, 1, 1), (3, 5, 2), (9, 4, 1), (17, 3, 3)])
def test_grouped_tile_order_visits_every_tile_once(mtiles, ntiles, L):
    got = {sm90.tile_coords(t, mtiles, ntiles) for t in range(L * mtiles * ntiles)}
    assert got == {(l, m, n) for l in range(L) for m in range(mtiles) for n in range(ntiles)}


def test_descriptor_fields():
    d = sm90.descriptor(0x1400, 16, 1024)
    assert d >> 32 == 0x40000040 and d & 0x3FFF == 0x140 and (d >> 16) & 0x3FFF == 1


def test_m_major_a_is_read_as_panels_with_the_transpose_bit():
    """An M-contiguous A (a weight gradient's transposed activations): the variant says so, the
    producer loads two 64-column panels per stage (as an N-major B), the k-loop steps the A
    descriptor 16 k-rows (2 KB) a k16, and the wgmma sets imm-trans-a."""
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_source
    from sm90_kernels import programs
    p = programs()["mmajor_a_bias_gelu"][0]
    src = sm90_source(p, "float16", False, False, False, False, a_kmajor=False)
    assert "tma_load_2d(sa + 0, tmA, m0 + 0, k0, fb)" in src and "tma_load_2d(sa + 8192, tmA, m0 + 64, k0, fb)" in src
    assert f"wgmma_desc(sa + wg * {sm90.A_HALF_BYTES} + 2048, 8192, 1024)" in src
    assert module_prelude("float16", False, False).endswith(
        "wgmma_ops(64, 'f16', False, False)\nacc_undef, wg_tie = undef_accumulators(64), accumulator_tie(64)\n")
    assert sm90.a_kmajor((0, 1, 256)) is False and sm90.a_kmajor((0, 256, 1)) is True
    a, _ = sm90.operand_maps(1, 300, 520, 200, (0, 1, 304), (0, 520, 1), False, 128, a_kmajor=False)
    assert a == ((300, 200), (608,), (64, 64))


def test_operand_maps():
    a, b = sm90.operand_maps(1, 300, 520, 200, (0, 200, 1), (0, 520, 1), False, 128)
    assert a == ((200, 300), (400,), (64, 128)) and b == ((520, 200), (1040,), (64, 64))
    a, b = sm90.operand_maps(3, 300, 520, 200, (60000, 200, 1), (0, 1, 200), True, 128)
    assert a == ((200, 300, 3), (400, 120000), (64, 128, 1)) and b == ((200, 520), (400,), (64, 128))


def _bound(M=256, N=256, K=128, a=None, b=None, dtype="float16", L=1):
    return SimpleNamespace(L=L, M=M, N=N, K=K, dtype=dtype, a_strides=a or (0, K, 1), b_strides=b or (0, N, 1))


@pytest.mark.parametrize("bound,cc,why", [
    (_bound(), (8, 0), "needs sm_90"),
    (_bound(dtype="float32"), (9, 0), "fp16/bf16"),
    (_bound(K=0), (9, 0), "empty"),
    (_bound(K=70), (9, 0), "A strides"),                       # 140-byte rows
    (_bound(a=(0, 1, 260)), (9, 0), "A strides"),              # M-contiguous A with 520-byte K rows
    (_bound(a=(0, 3, 3)), (9, 0), "A strides"),                # neither K- nor M-contiguous
    (_bound(N=45), (9, 0), "B strides"),                       # 90-byte rows of (K, N) B
    (_bound(b=(0, 3, 3)), (9, 0), "B strides"),                # neither K- nor N-contiguous
])
def test_calls_that_fall_back(bound, cc, why):
    from evt_backends.numba_cuda.select import sm90_refusal
    got = sm90_refusal(bound, 0x1000, 0x2000, cc, encode=False)
    assert got is not None and why in got, got


@pytest.mark.parametrize("bound", [_bound(), _bound(M=77, N=48, K=40), _bound(b=(0, 1, 128)),
                                   _bound(L=3, a=(256 * 128, 128, 1), b=(0, 1, 128)),
                                   _bound(a=(0, 1, 256)), _bound(M=77, a=(0, 1, 80), b=(0, 1, 128))])
def test_calls_that_fit(bound):
    from evt_backends.numba_cuda.select import sm90_refusal
    assert sm90_refusal(bound, 0x1000, 0x2000, (9, 0), encode=False) is None
    assert sm90_refusal(bound, 0x1008, 0x2000, (9, 0), encode=False) is not None     # A base not 16-byte aligned


def test_entry_name_from_the_cubin(sass):
    from evt_backends.numba_cuda.runtime.build_sm90 import kernel_entry
    built = sass["bare"][0]
    assert kernel_entry(built.image) == built.entry and "evt_kernel" in built.entry


@pytest.mark.parametrize("M,N,L,pingpong", [(128 * 16, 128 * 16, 1, False),    # 256 tiles < 2 x 132 SMs
                                            (128 * 16, 128 * 17, 1, True),     # 272 tiles
                                            (128 * 4, 128 * 11, 6, True),      # batches count too
                                            (1, 16, 1, False)])
def test_auto_schedule_takes_ping_pong_from_two_tiles_per_cta(monkeypatch, M, N, L, pingpong):
    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.runtime import launch_sm90
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: 132)
    traced = {w: evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program for w in WORKLOADS}
    for w in ("W1", "W3"):            # bias row, no input: the epilogue hides behind the other mainloop
        assert select.sm90_pingpong(_bound(M=M, N=N, L=L), traced[w]) is pingpong, w
    for w in ("W2", "W4"):            # an (M, N) input per row: latency-bound, needs all 8 warps
        assert select.sm90_pingpong(_bound(M=M, N=N, L=L), traced[w]) is False, w


@pytest.mark.parametrize("K,want", [(256, {"W2"}), (512, {"W2"}), (768, set())])
def test_auto_takes_the_overlapped_schedule_at_short_k_with_an_input(K, want):
    """Only epilogues that read an (M, N) input and sum no rows, at K <= 512 (measured)."""
    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda import select
    traced = {w: evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program for w in WORKLOADS}
    got = {w for w in ("W1", "W2", "W3", "W4") if select.sm90_overlap_pays(_bound(M=8192, N=3072, K=K), traced[w])}
    assert got == want


def test_schedule_option_is_checked():
    import numpy as np
    import evt_core
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    tree = evt_core.trace(lambda accum: {"D": accum}, {"accum": np.empty((4, 4), np.float32),
                                                        "D": np.empty((4, 4), np.float16)})
    got = NumbaCudaBackend().supports(tree, {"sm90_schedule": "fast"})
    assert not got and "sm90_schedule='fast' is not one of" in got.reason, got
    assert NumbaCudaBackend().supports(tree, {"sm90_schedule": "pingpong"})


def test_tile_inputs_staged_only_when_aligned_and_a_ring_fits():
    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.codegen.epilogue_sm90 import SmemLayout
    w4 = evt_core.trace(WORKLOADS["W4"].epilogue, WORKLOADS["W4"].example(64, 64)).program   # r: (M, N) fp16
    k = [t.name for t in w4.inputs].index("r")

    def bound(sm=256, sn=1, sl=0):
        b = _bound()
        b.inputs = [SimpleNamespace(strides=(0, 0, 1)) for _ in w4.inputs]
        b.inputs[k] = SimpleNamespace(strides=(sl, sm, sn))
        return b
    ptrs = [0x1000] * len(w4.inputs)
    assert select.sm90_aux_async(bound(), w4, ptrs, False)
    assert not select.sm90_aux_async(bound(sm=260), w4, ptrs, False)        # 520-byte rows
    assert not select.sm90_aux_async(bound(sn=256, sm=1), w4, ptrs, False)  # M-contiguous
    assert not select.sm90_aux_async(bound(), w4, [0x1008] * len(w4.inputs), False)
    lay = SmemLayout(w4, 128, False, False, True)
    assert lay.fits and lay.stages == 3 and lay.aux[k][1] == 64 * 128 * 2
    assert SmemLayout(w4, 128, False).stages == 4 and not SmemLayout(w4, 128, False).aux


@pytest.mark.parametrize("pitch", [128, 136])
@pytest.mark.parametrize("dtype,es", [("float16", 2), ("bfloat16", 2)])
def test_staged_input_copies_cover_the_tile_once_where_the_epilogue_reads(dtype, es, pitch):
    """aux_copy_lines' index math: the 128 threads' 16-byte copies cover the warpgroup's 64 x 128
    block exactly once, and element (r, c) lands at index r * pitch + c of the 16-bit buffer,
    where the epilogue reads it: dense rows (the staged epilogue) or rows padded to
    frag_layout.AUX_PITCH (the fragment epilogue)."""
    from evt_backends.numba_cuda.codegen.frag_layout import AUX_PITCH
    from evt_backends.numba_cuda.codegen.epilogue_sm90 import aux_copy_lines
    from trees import case
    assert AUX_PITCH == 136      # the padded case below
    p = case("dgelu", 0, 13, 11, 9, ab=dtype, out=dtype)[0].program
    lay = SimpleNamespace(aux={0: (0, 64 * pitch * es)}, bn=128, aux_row_bytes=lambda k, prog: pitch * es)
    src = "\n".join(aux_copy_lines(p, lay))
    per_chunk = 16 // es
    cpr = 128 // per_chunk
    per_thread = int(src.split("for u in range(")[1].split(")")[0])
    dst = src.split("cp_async16(")[1].split(", asrc")[0]
    assert f"// {cpr}" in src and f"* {per_chunk}" in src, src
    landed = {}
    for tid in range(128):
        for u in range(per_thread):
            q = tid + 128 * u
            row, col = q // cpr, (q % cpr) * per_chunk
            at = eval(dst, {"abuf0": 0, "q": q, "ar": row})      # the copy's destination byte
            for e in range(per_chunk):           # element (row, col + e) at byte at + e * es
                landed.setdefault((row, col + e), []).append(at + e * es)
    assert sorted(landed) == [(r, c) for r in range(64) for c in range(128)]
    assert all(v == [(r * pitch + c) * es] for (r, c), v in landed.items())


def test_ping_pong_hand_overs_pair_every_wait_with_one_arrive():
    """The ping-pong consumer's named barriers: warpgroup w waits on 3 + w (mainloop) and 5 + w
    (staging) before its local tile it > 0, and the other warpgroup arrives there after its own
    tile it - 1 when tile it exists. For every tile count per CTA, each wait gets exactly one
    arrive and no arrive is left without its wait (a half-filled barrier would pair with the
    wrong generation)."""
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import sm90_source
    from sm90_kernels import programs
    src = sm90_source(programs()["pingpong_bias_gelu"][0], "float16", False, False, False, False, True)
    for line in ("if it > 0:", "named_bar_sync(3 + wg, 256)", "named_bar_sync(5 + wg, 256)",
                 "if tile + cuda.gridDim.x < tiles:", "named_bar_arrive(4 - wg, 256)", "named_bar_arrive(6 - wg, 256)",
                 "tile = cuda.blockIdx.x + wg * cuda.gridDim.x", "tile = tile + 2 * cuda.gridDim.x", "it = wg"):
        assert line in src, line
    for n in range(1, 8):                    # tiles of this CTA: local indices 0 .. n - 1
        for first in (3, 5):                 # the mainloop pair and the staging pair
            waits = [(first + it % 2, it) for it in range(1, n)]                 # owner of it waits
            arrives = [(first + 1 - it % 2, it + 1) for it in range(n) if it + 1 < n]  # owner of it arrives for it + 1
            assert sorted(waits) == sorted(arrives), (n, first)


def test_panel_map_geometry():
    """The 64 x 64 panel maps of (M, N) epilogue tensors (TMA-stored outputs, TMA-loaded inputs):
    N innermost, byte strides of 16-bit rows and batches, a 3-D map only for batched tensors."""
    assert sm90.panel_map(3, 300, 520, (300 * 520, 520, 1), True) == ((520, 300, 3), (1040, 312000), (64, 64, 1))
    assert sm90.panel_map(3, 300, 520, (0, 528, 1), False) == ((520, 300), (1056,), (64, 64))
