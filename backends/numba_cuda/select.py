"""Which mainloop variant a bound call takes, and why.

A variant is the key the Runner compiles and caches a kernel under:
  ('simt', dtype)                                   fp32, the simulator, `simt=True`, or operands
                                                    cp.async cannot read;
  ('mma', dtype, a_kmajor, b_kmajor)                fp16/bf16 with 16-byte aligned A and B rows
                                                    (K- or M/N-contiguous);
  ('sm90', dtype, b_kmajor, a_batched, b_batched, pingpong, aux_async, frag, a_kmajor, bn, aux_ring, overlap,
   split)
                                                    `sm90=True` on an sm_90 GPU when the call
                                                    fits TMA's rules (sm90_refusal says why not);
                                                    the schedule from sm90_schedule (sm90_pingpong),
                                                    (M, N) inputs staged or not (sm90_aux_async),
                                                    the epilogue on the fragments with TMA-stored
                                                    outputs or staged (sm90_fragment), A K- or
                                                    M-contiguous (sm90.a_kmajor), the tile width
                                                    128 or 256 (sm90_tile_n), (M, N) inputs
                                                    TMA-loaded through the ring (sm90_aux_ring),
                                                    the overlapped cooperative schedule
                                                    (sm90_schedule="overlap", overlap_refusal),
                                                    serial split-K (option split_k: sm90_splits,
                                                    split_refusal; the count is a kernel parameter).
The Program does not fix the operands' layout, so the choice is made per call from the bound
strides and device addresses: pure Python, microseconds, unit-tested without a GPU.
"""
import os

import numpy as np

from evt_core.dtypes import DTYPES
from evt_core.errors import KernelCompileError
from evt_core.tree.ops import Op

from ..gpu import overlap, sm90, splitk
from ..gpu.reductions import COL, ROW, reduction_kind
from .codegen import epilogue_fragment
from .codegen.frag_layout import FragLayout
from .codegen.epilogue_sm90 import SmemLayout, tile_inputs
from .codegen.mainloop_sm90 import BN_DEFAULT, BN_WIDE
from .runtime import driver
from .runtime import launch_sm90
from .runtime.launch_sm90 import encode_maps, tile_count


def simulator():
    return os.environ.get("NUMBA_ENABLE_CUDASIM") == "1"


def variant(b, a_ptr, b_ptr, force_simt, use_sm90, schedule="auto", program=None, in_ptrs=(), deterministic=False,
            out_ptrs=(), epilogue="auto", fast=(), aux_ring=True, tile_n="auto", split_k=1):
    """(variant, note): note is what kernel.stages["sm90"] records for this call (the sm90
    kernel's description, or why the call falls back to mma.sync), None when sm90 is off.
    a_ptr, b_ptr: the device addresses the sm90 kernel's tensor maps would read. schedule: the
    sm90 kernel's, "pingpong", "cooperative", "overlap" (overlap_refusal) or "auto"
    (sm90_pingpong of `program`); in_ptrs,
    out_ptrs: the inputs' and outputs' device addresses, deterministic the option, for
    sm90_aux_async and sm90_fragment; epilogue: "auto" (the fragment epilogue where
    sm90_fragment holds), "fragment" (wherever the call allows it) or "staged"; fast: the
    instructions the fragment epilogue spells with MUFU approximations; aux_ring: the option
    (False keeps (M, N) inputs on cp.async copies); tile_n: the sm90_tile_n option ("auto",
    128 or 256: sm90_tile_n; 256 under schedule "auto" takes the cooperative schedule where
    that kind can run 256-wide tiles, else leaves the schedule as "auto" has it); split_k: the
    option (sm90_splits; where split_refusal has no objection the call takes the cooperative
    schedule over split-K's (tile, split) units, else runs unsplit and the note says why)."""
    if simulator() or force_simt or b.dtype == "float32":
        return ("simt", b.dtype), None
    note = None
    if use_sm90:
        why = sm90_refusal(b, a_ptr, b_ptr, driver.compute_capability())
        if why is None:
            kmajor = b_kmajor(b)
            ns = sm90_splits(b, split_k)
            split_refused = split_refusal(b, program, schedule, ns) if ns > 1 else None
            split = ns > 1 and split_refused is None
            if split:
                schedule = "cooperative"

            def kind(pp):
                """(fragment epilogue, (M, N) inputs copied by cp.async, through the ring) under pp."""
                frag = epilogue != "staged" and sm90_fragment(b, program, in_ptrs, out_ptrs, pp, deterministic,
                                                              measured=epilogue == "auto", fast=fast)
                aux = (not pp and bool(tile_inputs(program))) if frag else \
                    (not pp and sm90_aux_async(b, program, in_ptrs, deterministic))
                ring = bool(frag and aux and aux_ring and sm90_aux_ring(program, deterministic))
                return frag, aux and not ring, ring
            pp = schedule == "pingpong" or (schedule == "auto" and sm90_pingpong(b, program))
            frag, aux, ring = kind(pp)
            overlap = schedule == "overlap" or (schedule == "auto" and not pp and ring and tile_n != BN_WIDE
                                                and sm90_overlap_pays(b, program))
            refused = None      # why sm90_tile_n=256 is not taken
            if pp and schedule == "auto" and tile_n != BN_DEFAULT:    # cooperative where that kind gets 256
                coop = kind(False)
                if sm90_tile_n(b, program, False, coop[0], deterministic, coop[2], tile_n) == BN_WIDE:
                    pp, (frag, aux, ring) = False, coop
                elif tile_n == BN_WIDE:
                    refused = sm90_wide_tile_refusal(program, False, coop[0], deterministic, coop[2])
            akm = sm90.a_kmajor(b.a_strides)
            bn = BN_DEFAULT if overlap and tile_n == "auto" else \
                sm90_tile_n(b, program, pp, frag, deterministic, ring, tile_n)
            if tile_n == BN_WIDE and bn != BN_WIDE:
                refused = refused or sm90_wide_tile_refusal(program, pp, frag, deterministic, ring)
            not_overlapped = overlap_refusal(frag, aux, bn) if overlap else None
            overlap = overlap and not_overlapped is None
            split_note = (f"serial split-K, {ns} splits of K" if split else
                          f"split_k not taken ({split_refused})" if split_refused else "")
            return (("sm90", b.dtype, kmajor, b.a_strides[0] != 0, b.b_strides[0] != 0, pp, aux, frag, akm, bn, ring,
                     overlap, split),
                    sm90_description(b, kmajor, pp, aux, frag, akm, bn, ring, refused, overlap, not_overlapped,
                                     split_note))
        note = f"fallback to the mma.sync kernel: {why}"
    a_layout = _tc_layout(b.a_strides[2], b.a_strides[1])
    b_layout = _tc_layout(b.b_strides[1], b.b_strides[2])
    aligned = all(s % 8 == 0 for s in (b.a_strides[0], b.b_strides[0])) and \
        address(b.A) % 16 == 0 and address(b.B) % 16 == 0
    if a_layout is None or b_layout is None or not aligned:
        return ("simt", b.dtype), note
    return ("mma", b.dtype, a_layout, b_layout), note


def _tc_layout(s_k, s_mn):
    """True: K contiguous (rows of K); False: M/N contiguous; None: cp.async cannot read it."""
    if s_k == 1 and s_mn % 8 == 0:
        return True
    if s_mn == 1 and s_k % 8 == 0:
        return False
    return None


def address(x):
    """The base address of a bound array: host for NumPy, device otherwise."""
    return x.ctypes.data if isinstance(x, np.ndarray) else x.ptr


def sm90_refusal(b, a_ptr, b_ptr, cc, encode=True):
    """None when the call fits the sm_90a kernel, else the reason it does not. encode: also ask
    the driver for both tensor maps (it has rules of its own; the maps are cached for the launch)."""
    if cc != (9, 0):
        return f"the device is sm_{cc[0]}{cc[1]}; the wgmma/TMA kernel needs sm_90"
    if b.dtype not in ("float16", "bfloat16"):
        return f"{b.dtype} operands (wgmma here takes fp16/bf16)"
    if min(b.M, b.N, b.K) == 0:
        return "an empty problem dimension (TMA maps need extents >= 1)"
    (aL, aM, aK), (bL, bK, bN) = b.a_strides, b.b_strides
    a_rows = aM if aK == 1 else aK if aM == 1 else 0      # K-contiguous, else M-contiguous (a weight gradient's)
    if not (a_rows > 0 and sm90.tma_rows_ok(a_ptr, a_rows, aL)):
        return (f"A strides {b.a_strides} at address {a_ptr:#x}: TMA needs unit stride along K or M, a 16-byte "
                "aligned base and 16-byte multiple row and batch strides (K % 8 == 0 for a dense K-contiguous A)")
    if b_kmajor(b) is None or not sm90.tma_rows_ok(b_ptr, bN if bK == 1 else bK, bL):
        return (f"B strides {b.b_strides} at address {b_ptr:#x}: TMA needs unit stride along K or N, a 16-byte "
                "aligned base and 16-byte multiple row and batch strides")
    if max(b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, BN_DEFAULT), b.M, b.N, b.K) >= 2 ** 31:
        return "a problem too large for the kernel's 32-bit tile arithmetic"
    if encode:
        try:
            # (the 128-wide maps: a 256-wide tile's differ only in a K-major B's box, 64 x 256,
            # within TMA's 256-element box sides)
            encode_maps(b, a_ptr, b_ptr, b_kmajor(b), BN_DEFAULT)
        except KernelCompileError as e:
            return f"the driver refused a tensor map ({e})"
    return None


def b_kmajor(b):
    """True: B is K-contiguous ((N, K) storage); False: N-contiguous; None: neither (the cupy
    backend's rule, so both backends pick the same B layout)."""
    _, bK, bN = b.b_strides
    if bK == 1 and bN != 1:
        return True
    return False if bN == 1 else None


def sm90_splits(b, option):
    """ns, the splits of K a call with split_k=`option` runs (backends/gpu/splitk.py: the int
    given or "auto"'s rule on 128 x 128 tiles and this GPU's SM count, then at most the call's
    k-blocks); 1: no split-K."""
    sms = launch_sm90.sm_count() if option == "auto" else None
    return splitk.splits_run(splitk.requested(option, b.L, b.M, b.N, b.K, sms, sm90.BK), b.K, sm90.BK)


def split_refusal(b, program, schedule, ns):
    """None where the call can run split-K with ns splits, else why not: split-K runs on the
    cooperative schedule only (ping-pong's warpgroups hold whole tiles, the overlapped one a
    tile's epilogue under the next tile's mainloop), without (M, N) inputs (their cp.async
    copies and ring loads are per tile, and only a tile's last split runs its epilogue), and
    with fewer than 2^31 work units (the kernel's 32-bit unit arithmetic)."""
    if schedule in ("pingpong", "overlap"):
        return f"sm90_schedule={schedule!r}: split-K runs on the cooperative schedule only"
    if program is None or tile_inputs(program):
        return "the epilogue reads (M, N) inputs, which split-K does not stage"
    if b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, BN_DEFAULT) * ns >= 2 ** 31:
        return "too many (tile, split) units for the kernel's 32-bit arithmetic"
    return None


def sm90_pingpong(b, program):
    """Ping-pong hides one warpgroup's epilogue behind the other's mainloop, but then only 4
    warps run an epilogue where cooperative runs 8, for twice the rows. So "auto" takes it
    where every CTA of the persistent grid has two tiles or more to alternate and the epilogue
    loads no input per row (an (M, N) residual or gradient input): such loads are latency-bound
    and need the 8 warps. Measured on the H200 (bench/RESULTS.md, 2026-12-01): ping-pong 4-5 %
    faster on R0, W1 and W3, 8-45 % slower on W2 and W4. A column vector beside two outputs
    or more no longer sends the fragment epilogue to the cooperative schedule: it spilled
    only because LLVM hoisted the staging addresses out of the tile loop (ptx_sm90.per_tile),
    and the cupy backend's autotuner picks ping-pong for W1 (2026-12-03)."""
    tiles = b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, BN_DEFAULT)     # ping-pong tiles are 128 wide
    per_row_loads = any(program.spans(t)[1] for t in program.inputs)
    return tiles >= 2 * launch_sm90.sm_count() and not per_row_loads


# 128 x 256 tiles (BN_WIDE) where they were measured to pay: sm90_wide_tile_pays
WIDE_TILE_MIN_K = 4096        # the big-K weight gradients measured
WIDE_TILE_MIN_FILL = 0.7      # 128 x 256 tiles per SM the grid needs at least
WIDE_TILE_MIN_WAVES = 3.5     # a plain store at any K: 128 x 256 tiles per SM (sm90_wide_tile_pays)


def sm90_tile_n(b, program, pingpong, frag, deterministic, aux_ring=False, choice="auto"):
    """The tile width of an sm90 call: BN_WIDE (128 x 256, m64n256k16, 128 fp32 accumulators
    per thread) or BN_DEFAULT (128 x 128). choice, the sm90_tile_n option: 128 always gives
    128; 256 gives 256 wherever the kernel kind can run it (sm90_wide_tile_fits), else 128
    (kernel.stages["sm90"] says why: a per-call fallback like the mma.sync one, since the kind
    depends on the call's strides and alignment); "auto" gives 256 only where the kind can run
    it and the problem is one where it was measured to pay (sm90_wide_tile_pays). aux_ring:
    the call's (M, N) inputs go through the ring (select.sm90_aux_ring; copied inputs keep 128)."""
    if choice == BN_DEFAULT or not sm90_wide_tile_fits(program, pingpong, frag, deterministic, aux_ring):
        return BN_DEFAULT
    if choice == BN_WIDE:
        return BN_WIDE
    return BN_WIDE if sm90_wide_tile_pays(b, program) else BN_DEFAULT


def sm90_wide_tile_fits(program, pingpong, frag, deterministic, aux_ring=False):
    """Whether a kernel kind can take 128 x 256 tiles (sm90_wide_tile_refusal says why not)."""
    return sm90_wide_tile_refusal(program, pingpong, frag, deterministic, aux_ring) is None


def sm90_wide_tile_refusal(program, pingpong, frag, deterministic, aux_ring=False):
    """None when a kernel kind can take 128 x 256 tiles, else why not:
    - the cooperative schedule: a ping-pong warpgroup holds a whole tile, 256 accumulators per
      thread at this width;
    - the fragment epilogue: the staged one's fp32 staging (2 x 64 x 264 x 4 B = 132 KB) leaves
      no room for a ring of 48 KB slots;
    - (M, N) inputs only through the ring (aux_ring, 16-bit): a cp.async copy's padded rows are
      128 wide. A 128 x 256 tile's input is 8 panels of 8 KB, six per 48 KB slot, so it takes
      two ring positions after the tile's k-blocks (sm90.aux_ring_geometry), and the ring
      needs one more (sm90.ring_holds_aux);
    - a ring of three slots or more beside the epilogue's buffers: a 128 x 256 16-bit output's
      whole staging takes 64 KB, which leaves three 48 KB slots of the H200's 227 KB beside one
      output (W4, an fp16 residual through the ring: 216,112 bytes); two outputs recycle two
      8 KB panel buffers per warpgroup instead (32 KB an output, FragLayout.recycles) and keep
      three slots; three outputs leave two.
    Reductions take any width: a row's partial covers the thread's 64 columns of the 256 and
    combines across the quad as at 128; a column reduction's reduce-scatter runs over 64
    partials a thread instead of 32 (4 KB of column partials per warpgroup in the scratch).
    The kinds left built for sm_90a on the CPU with no LDL/STL and 168 registers beside the 128
    accumulators (test_sm90_codegen.py: a bare store, an M-major A, bias + gelu_tanh, W4's
    layer-norm statistics: a column vector, an fp16 (M, N) input through the ring, two fp32 row
    sums; W1's two recycled outputs; a column vector with a column sum), so no kind is excluded
    for spilling."""
    if pingpong:
        return "the ping-pong schedule (256 accumulators per thread)"
    if not frag or program is None:
        return "the staged epilogue (its fp32 staging leaves no room for a ring)"
    if tile_inputs(program) and not aux_ring:
        return "(M, N) inputs copied by cp.async (128-wide rows; 16-bit inputs with aux_ring=True take the ring)"
    lay = FragLayout(program, BN_WIDE, deterministic, False, aux_ring=aux_ring)
    if not (lay.fits and lay.stages >= 3):
        return (f"shared memory: {len(program.outputs)} output(s) leave no ring of three 48 KB slots"
                + (" beside the (M, N) inputs' ring positions" if lay.aux_ring else ""))
    return None


def sm90_wide_tile_pays(b, program=None):
    """Whether a call's problem is one where 128 x 256 tiles were measured faster than 128 x 128.
    On the H200 the cupy backend's autotuner picks 128 x 256 (cooperative, 4 or 3 ring slots)
    for the large-K weight-gradient GEMMs of a BERT training step, 8-12 % faster than this
    kernel's 128 x 128 (A M-major, B N-major, a plain store epilogue; cupy 128 x 256 against
    numba 128 x 128: 1024 x 4096 x 16384 190 against 206 us, 4096 x 1024 x 16384 185 against
    202, 3072 x 1024 x 16384 158 against 177); a 128 x 256 tile reads 1.33 x less A and B per
    output element, the likely reason once the k-loop dominates. So, where measured only:
    - K >= WIDE_TILE_MIN_K: at small K the epilogue and the pipeline's fill weigh more, and
      this kernel's wide ring has 3 slots, not 4 (the output staging takes the room), which
      was not measured there;
    - N >= 256 (what "a multiple of 256 or at least 256" comes to): below 256 half a tile
      would compute padding;
    - a grid of 128 x 256 tiles that fills most of the GPU, L ceil(M / 128) ceil(N / 256) >=
      WIDE_TILE_MIN_FILL x the SM count: half as many tiles as 128 x 128 leave SMs idle where
      128 x 128 tiles would still fill them (the three shapes above: 96-128 tiles, 132 SMs).
    Measured without split-K (the option split_k, off by default). The schedule and epilogue
    conditions are sm90_wide_tile_fits'. The same rule holds for every kind that fits, measured
    at 4096 x 4096 x 4096 (H200, 2026-12-03, bench/RESULTS.md runs 85-86): W4 (a bias, an fp16
    residual through the ring, two row sums) 221.6-231.0 against 238.6-244.1 us at 128 x 128,
    an (M, N) residual alone 211.2 against 225.2, a row sum 207.0 against 219.8 (ping-pong),
    W3's row max 216.7 against 222.1; at K = 1024 (16384 x 4096 x 1024) the residual alone and
    W3 lose at 128 x 256 (262.4 against 252.0, 239.3 against 231.4), W4 gains (271.8 against
    283.0): K >= 4096 stays the line.
    A plain store (no input, no reduction, one output: the bare GEMM) also takes 128 x 256 at
    any K where its tiles make WIDE_TILE_MIN_WAVES waves or more, so the last wave's
    quantisation is small: measured on the H200 (bench/RESULTS.md, 2026-12-03, runs 79-80),
    cooperative 128 x 256 against ping-pong 128 x 128 at 8192 x 3072 x 768 (5.8 waves) 61.2-61.8
    against 64.6-64.9 us, 16384 x 4096 x 1024 220.9 against 229.6, 4096^3 (3.9 waves) 213.8
    against 220.4, 8192 x 8192 x 768 168.2 against 176.1; at 8192 x 768 x 3072 (1.5 waves)
    75.8 against 60.2. W1 (a bias, two outputs) measured within 2 % either way, so it keeps
    128 x 128 there. W1 and W2 (two recycled outputs; a column sum and an fp16 input through the
    ring) at 4096 x 4096 x 4096 (H200, 2026-12-07, bench/RESULTS.md run 90): 219.3 against
    230.5 us and 234.0 against 244.1 at 128 x 128, so the K rule holds for them too; at 8192 x
    3072 x 768 and 8192 x 768 x 3072 they stay at 128 (K < 4096)."""
    if b.N < BN_WIDE or (program is not None and _unmeasured_wide(program)):
        return False
    tiles = b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, BN_WIDE)
    sms = launch_sm90.sm_count()
    if program is not None and _plain_store(program) and tiles >= WIDE_TILE_MIN_WAVES * sms:
        return True
    return b.K >= WIDE_TILE_MIN_K and tiles >= WIDE_TILE_MIN_FILL * sms


def _unmeasured_wide(program):
    """Kinds whose speed at 128 x 256 is not measured, so "auto" keeps them at 128 (sm90_tile_n=256
    still runs them: their GPU tests passed on the H200 on 2026-12-07): two (M, N) inputs through
    the ring (recycled panel buffers beside them) and whole-tile reductions."""
    return len(tile_inputs(program)) > 1 or any(reduction_kind(r) not in (ROW, COL) for r in program.reductions)


def _plain_store(program):
    """The bare GEMM's epilogue: no input, no reduction, one output."""
    return not program.inputs and not program.reductions and len(program.outputs) == 1


def sm90_aux_async(b, program, in_ptrs, deterministic):
    """The cooperative kernel copies its (M, N) inputs into shared memory with cp.async under the
    mainloop (codegen/epilogue_sm90.aux_copy_lines) when each one's rows are N-contiguous, its
    base and row and batch strides 16-byte aligned, and the buffers leave room for a ring of
    three slots (so fp32 tile inputs, 64 KB of buffers, stay on the per-row path)."""
    if not (tile_inputs(program) if program is not None else []) or not _inputs_copyable(b, program, in_ptrs):
        return False
    lay = SmemLayout(program, BN_DEFAULT, deterministic, False, True)
    return lay.fits and lay.stages >= 3


def _inputs_copyable(b, program, in_ptrs):
    """Every (M, N) input has N-contiguous rows, and a 16-byte aligned base, row and batch stride."""
    if len(in_ptrs) < len(program.inputs):
        return False
    for k in tile_inputs(program):
        sl, sm, sn = b.inputs[k].strides
        if sn != 1 or not sm90.tma_rows_ok(in_ptrs[k], sm, sl, DTYPES[program.inputs[k].dtype].itemsize):
            return False
    return True


# ops numba lowers to long libdevice sequences (no fast spelling here yet)
_LONG_MATH = frozenset({Op.TANH, Op.EXP, Op.LOG, Op.SIGMOID, Op.SILU, Op.GELU, Op.GELU_GRAD, Op.GELU_TANH,
                        Op.GELU_TANH_GRAD, Op.ERF})


def sm90_fragment(b, program, in_ptrs, out_ptrs, pingpong, deterministic, measured=True, fast=()):
    """The fragment epilogue (codegen/epilogue_fragment.py) takes a call when its tree can
    (epilogue_fragment.refusal), every output is N-contiguous with TMA-aligned rows (its
    stores are 64 x 64 panels), every (M, N) input can be staged (none in ping-pong, whose
    tiles have no input buffers; copyable ones in cooperative) and the layout leaves a ring of
    three slots or more (two starve the mainloop).

    And, measured (bench/RESULTS.md, H200, 2026-12-01): not for a tree with a transcendental
    op spelled by libdevice (not in `fast`, the MUFU-spelled instructions) and no reduction.
    Fully unrolled over the fragment, libdevice's tanh made R2 and W1 slower than the staged
    epilogue's compact row loop (R2 127.6 against 106.8 us, W1 166.8 against 114.2); with a
    reduction the fragment combines win anyway (W2 127.9 against 141.8). Nor, measured on
    XML-CNN's U-turn forward (bench/RESULTS-train.md, runs 38 and 43-46), for libdevice
    transcendentals beside an fp32 (M, N) input: exp, log and sigmoid exact on the fragments
    took 69 us, the staged epilogue 64; with fast_math=True's MUFU spellings 40.
    `measured=False` (sm90_epilogue="fragment") skips these rules."""
    if program is None or epilogue_fragment.refusal(program) is not None or len(out_ptrs) < len(program.outputs):
        return False
    libdevice = any(ins.op in _LONG_MATH and i not in fast for i, ins in enumerate(program.instrs))
    fp32_tile_input = any(program.inputs[k].dtype == "float32" for k in tile_inputs(program))
    if measured and libdevice and (not program.reductions or fp32_tile_input):
        return False
    for ptr, t in zip(out_ptrs, b.outputs):
        sl, sm, sn = t.strides
        if sn != 1 or not sm90.tma_rows_ok(ptr, sm, sl):
            return False
    if tile_inputs(program) and (pingpong or not _inputs_copyable(b, program, in_ptrs)):
        return False
    lay = FragLayout(program, BN_DEFAULT, deterministic, pingpong)
    return lay.fits and lay.stages >= 3


def sm90_aux_ring(program, deterministic):
    """The cooperative fragment epilogue's (M, N) inputs go through the mainloop ring (the
    producer TMA-loads a tile's panels into the positions after its k-blocks, the cupy
    backend's aux_ring) when every one is 16-bit (64 x 64 swizzled panels; an fp32 input keeps
    its cp.async copy) and the ring, with no input buffers beside it, holds three slots or more
    plus the tile's aux stages (sm90.ring_holds_aux). Measured on the cupy kernel (H200,
    bench/RESULTS.md, 2026-12-02): BERT's LayerNorm backward, two (M, N) inputs, 286 -> 230 us;
    the 32-64 KB the copies took become one or two more ring slots. The call's strides and
    alignment are sm90_fragment's checks (_inputs_copyable: TMA's own rules)."""
    ks = tile_inputs(program) if program is not None else []
    if not ks or any(program.inputs[k].dtype not in ("float16", "bfloat16") for k in ks):
        return False
    lay = FragLayout(program, BN_DEFAULT, deterministic, False, aux_ring=True)
    return lay.fits and lay.stages >= 3


def sm90_overlap_pays(b, program):
    """Where "auto" takes the overlapped cooperative schedule (a cooperative fragment kind whose
    (M, N) inputs go through the ring): backends/gpu/overlap.pays, the rule measured on this
    kernel: µs auto (cooperative) against overlapped, H100: W2 at 16384×2048×256 89.7 / 80.4, at
    8192×3072×512 84.0 / 77.0, at 8192×3072×768 100.7 / 103.6; R5 (a residual input) at K = 512
    62.8 / 58.8, at 256 and 768 equal; W4 (row sums) slower at every K; the MLP's backward
    group dh = (dy W2) ⊙ relu'(h) with db1, K = 256: 74.9 / 68.9."""
    return program is not None and overlap.pays(program, b.K, bool(tile_inputs(program)))


def overlap_refusal(frag, aux_async, bn):
    """None where the overlapped cooperative schedule (codegen/consumer_overlap.py) can run the
    kernel kind, else why not: it evaluates the fragment epilogue in pieces (the staged one is a
    single loop), holds two 64-accumulator sets (a 128 x 256 tile's two 128-accumulator sets do
    not fit 232 registers), and its cp.async-copied inputs would need a second buffer for the
    next tile."""
    if not frag:
        return "the staged epilogue"
    wide = overlap.width_refusal(bn)
    if wide:
        return wide
    if aux_async:
        return "(M, N) inputs copied by cp.async (one buffer, the next tile's copies would overwrite it)"
    return None


def sm90_description(b, kmajor, pingpong, aux_async=False, frag=False, a_kmajor=True, bn=BN_DEFAULT, aux_ring=False,
                     wide_refused=None, overlap=False, not_overlapped=None, split_note=""):
    """wide_refused: why sm90_tile_n=256 was not taken (sm90_wide_tile_refusal), said after the
    tile; not_overlapped: why sm90_schedule="overlap" was not taken (overlap_refusal);
    split_note: split-K's count, or why split_k was not taken, said at the end."""
    tiles = b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, bn)
    refused = f" (sm90_tile_n=256 not taken: {wide_refused})" if wide_refused else ""
    schedule = "ping-pong" if pingpong else "overlapped cooperative" if overlap else "cooperative"
    if not_overlapped:
        schedule += f" (sm90_schedule='overlap' not taken: {not_overlapped})"
    return (f"sm_90a warp-specialised kernel: {b.dtype}, tile {sm90.BM}x{bn}x{sm90.BK}{refused}, "
            f"{schedule} schedule, A {'K' if a_kmajor else 'M'}-major, "
            f"B {'K' if kmajor else 'N'}-major, "
            f"{'epilogue on the fragments with TMA-stored outputs' if frag else 'staged epilogue'}, "
            f"{'(M, N) inputs staged by cp.async, ' if aux_async else ''}"
            f"{'(M, N) inputs TMA-loaded through the ring, ' if aux_ring else ''}{tiles} tiles over a persistent grid"
            f"{', ' + split_note if split_note else ''}")
