"""The sm_90a kernel's epilogue: a consumer warpgroup stages its wgmma fragments (fp32) through
shared memory into the thread layout of EpilogueWriter (thread (ty, tx) of 4 x 32 owns rows
ty + 4i and columns tx + 32j), then runs the generated epilogue there.

Why staging instead of evaluating the tree on the fragment itself: the EpilogueWriter is what
every op, reduction (row / col / all / elem, MEAN counts, AMIN carried negated) and the
deterministic mode are written for; in its layout consecutive lanes touch consecutive columns,
so aux loads and output stores are coalesced without per-output shared-memory staging, and the
accumulators die before the epilogue starts, which keeps the consumer far from its 232
registers. Row reductions park each lane's row partial in the staged element it has just read
and combine a warp's rows after the row loop (EpilogueWriter row_park): a shuffle chain and a
global combine inside every trip of the loop serialised it (W3 and W4 paid 2-3 x the bare GEMM).

Two schedules (mainloop_sm90.py):
  cooperative - each warpgroup stages its 64 rows in its own buffer and synchronises on its own
                named barrier (ids 1 and 2; 0 is __syncthreads), never waiting for the other;
  ping-pong   - a warpgroup owns whole 128-row tiles; the two take turns on ONE 128-row staging
                buffer (named barriers 5 and 6 hand it over), which costs the same shared memory
                as two 64-row buffers and lets a tile's accumulators die as soon as it is staged.
"""
from evt_core.dtypes import DTYPES

from ...gpu import sm90
from .epilogue import EpilogueWriter, Layout

TY, TX = 4, 32          # the warpgroup's warps x lanes in the epilogue layout
SMEM_LOADERS = {"float16": "lds_f16", "bfloat16": "lds_bf16", "float32": "lds"}


def staging_pitch(bn):
    """fp32 elements per staged row: bn + 8 puts the fragment's row pairs g, g + 8 in different
    bank halves."""
    return bn + 8


def staged_rows(pingpong):
    """Rows one warpgroup stages and evaluates per tile."""
    return 2 * sm90.WG_ROWS if pingpong else sm90.WG_ROWS


def tile_inputs(program):
    """Indices of the inputs that span M and N (a residual, a saved activation): loaded per
    element, so the ones worth copying into shared memory ahead of the epilogue."""
    return [k for k, t in enumerate(program.inputs) if all(program.spans(t)[1:])]


def _writer(program, bn, deterministic, pingpong, aux_async=False):
    lay = Layout(TY, TX, staged_rows(pingpong) // TY, bn // TX, rows_unrolled=False)
    staged = {k: (f"abuf{k}", bn, SMEM_LOADERS[program.inputs[k].dtype])
              for k in (tile_inputs(program) if aux_async else [])}
    return EpilogueWriter(program, lay, deterministic, barrier="named_bar_sync(1 + wg, 128)",
                          row_park=("stg", staging_pitch(bn)), staged_inputs=staged)


def deepest_ring(layout):
    """The ring depth for a layout family `layout(stages)`: STAGES down to 2, the first that fits
    (2 when none does; the layout's `fits` then says so)."""
    from .mainloop_sm90 import STAGES
    for stages in range(STAGES, 1, -1):
        if layout(stages).fits:
            break
    return stages


class SmemLayout:
    """Byte offsets inside the 1024-aligned dynamic shared memory: the ring (stages x (A, B)),
    then the fp32 staging (one 64-row buffer per consumer warpgroup, or one shared 128-row
    buffer for ping-pong: the same bytes), then per consumer warpgroup its reduction scratch
    and (aux_async) one 64 x bn buffer per tile input, then the mbarriers. The ring has
    STAGES slots, or fewer where the aux buffers need the room (`fits` says whether any ring
    of two slots or more fits)."""
    aux_ring = False        # (M, N) inputs through the ring: the fragment epilogue's (FragLayout)

    def __init__(self, program, bn, deterministic, pingpong=False, aux_async=False, stages=None):
        assert not (pingpong and aux_async), "aux buffers are per 64-row cooperative warpgroup"
        if stages is None:
            stages = deepest_ring(lambda n: SmemLayout(program, bn, deterministic, pingpong, aux_async, n))
        self.stages, self.bn, self.pingpong, self.aux_async = stages, bn, pingpong, aux_async
        self.pitch = staging_pitch(bn)
        self.ring = stages * sm90.stage_bytes(bn)
        self.staging_bytes = staged_rows(pingpong) * self.pitch * 4
        self.staging = self.ring
        self.scratch_bytes = (_writer(program, bn, deterministic, pingpong).scratch_size * 4 + 15) // 16 * 16
        self.scratch = self.staging + (1 if pingpong else 2) * self.staging_bytes
        self.aux = {}           # input index -> (byte offset of warpgroup 0's buffer, bytes per warpgroup)
        end = self.scratch + 2 * self.scratch_bytes
        for k in (tile_inputs(program) if aux_async else []):
            size = staged_rows(pingpong) * bn * DTYPES[program.inputs[k].dtype].itemsize
            self.aux[k] = (end, size)
            end += 2 * size
        self.bars = (end + 7) // 8 * 8
        self.used = self.bars + 16 * stages
        self.total = self.used + sm90.SWIZZLE_ALIGN      # slack to round the base up to 1024
        self.fits = self.total <= sm90.MAX_DYNAMIC_SHARED and stages >= 2

    def aux_row_bytes(self, k, program):
        return self.bn * DTYPES[program.inputs[k].dtype].itemsize


def aux_copy_lines(program, lay):
    """At a tile's start (consumer, before its k-loop): this warpgroup copies its 64 rows of
    every tile input into its aux buffer (rows lay.aux_row_bytes apart) with cp.async, 16 bytes
    per copy, zero-filled past M and N, so the copies run under the mainloop and the epilogue reads shared memory.
    Needs N-contiguous rows and 16-byte aligned bases and row strides (select.sm90_aux_async)."""
    if not lay.aux:
        return []
    out = ["named_bar_sync(1 + wg, 128)   # the previous tile's epilogue is done reading the aux buffers",
           f"m0a = m0 + {sm90.WG_ROWS} * wg"]
    for k, (off, size) in lay.aux.items():
        es = DTYPES[program.inputs[k].dtype].itemsize
        per_chunk = 16 // es                          # elements per 16-byte copy
        cpr = lay.bn // per_chunk                     # copies per row
        per_thread = sm90.WG_ROWS * cpr // 128
        row_bytes = lay.aux_row_bytes(k, program)     # dense, or padded (frag_layout.AUX_PITCH)
        dst = f"abuf{k} + q * 16" if row_bytes == cpr * 16 else f"abuf{k} + ar * {row_bytes} + (q % {cpr}) * 16"
        out += [f"abuf{k} = sbase + {off} + wg * {size}    # {program.inputs[k].name}",
                f"for u in range({per_thread}):",
                f"    q = tid + 128 * u",
                f"    ar = q // {cpr}",
                f"    an = n0 + (q % {cpr}) * {per_chunk}",
                f"    am = m0a + ar",
                f"    aok = (am < M) & (an < N)",
                f"    abytes = min(N - an, {per_chunk}) * {es} if aok else 0",
                f"    asrc = in{k}_p + (l * in{k}_sl + am * in{k}_sm + an) * {es} if aok else in{k}_p",
                f"    cp_async16({dst}, asrc, abytes)"]
    out.append("cp_async_commit()")
    return out


def epilogue_lines(program, lay, frags, deterministic):
    """Per tile, after the consumer's final wgmma wait: names m0, n0, mt, nt, l, wg, tid, it and
    the accumulator tuples `frags` (one per 64 rows: one cooperative, two ping-pong)."""
    epi = _writer(program, lay.bn, deterministic, lay.pingpong, lay.aux_async)
    P = lay.pitch
    out = ["# ---- fused epilogue: stage the fragments, then evaluate the tree in the SIMT layout ----",
           "ty = tid // 32    # warp of the warpgroup",
           "tx = tid % 32",
           "fg = tx // 4      # fragment row group",
           "fq = tx % 4       # fragment column pair",
           f"scratch = sbase + {lay.scratch} + wg * {lay.scratch_bytes}"]
    if lay.pingpong:
        out += [f"stg = sbase + {lay.staging}",
                "m0w = m0",
                "tile_m = mt    # deterministic partial slot: one per 128-row tile",
                "if it > 0:",
                "    named_bar_sync(5 + wg, 256)   # the other warpgroup's epilogue is done reading stg"]
    else:
        out += [f"stg = sbase + {lay.staging} + wg * {lay.staging_bytes}",
                f"m0w = m0 + {sm90.WG_ROWS} * wg     # this warpgroup's first row",
                "tile_m = mt * 2 + wg   # deterministic partial slot: one per 64-row block",
                "named_bar_sync(1 + wg, 128)   # the previous tile's epilogue is done reading stg"]
    # fragment_position: d[4j + e] sits at row 16 ty + fg + 8 (e // 2), column 8j + 2 fq + e % 2
    out += ["tile_n = nt", f"fr = (16 * ty + fg) * {P} + 2 * fq"]
    for h, acc in enumerate(frags):
        r0 = h * sm90.WG_ROWS * P
        for j in range(lay.bn // 8):        # an m64nBN fragment: bn / 2 fp32 per thread, 4 per store
            out.append(f"sts_frag(stg, fr + {r0 + 8 * j}, fr + {r0 + 8 * P + 8 * j}, "
                       f"({acc}[{4 * j}], {acc}[{4 * j + 1}], {acc}[{4 * j + 2}], {acc}[{4 * j + 3}]))")
    if lay.aux:      # (abuf<k> was set where the copies were issued, at the tile's start)
        out.append("cp_async_wait_0()    # this thread's aux copies have landed (the barrier: everyone's)")
    out.append("named_bar_sync(1 + wg, 128)   # the fragments are staged")
    out += epi.prologue()
    out += epi.chunk(lambda i, j: f"lds(stg, (ty + {i} * {TY}) * {P} + tx + {j * TX})", row0="m0w")
    if lay.pingpong:
        out += ["if tile + cuda.gridDim.x < tiles:",
                "    named_bar_arrive(6 - wg, 256)   # stg is free for the other warpgroup's next tile"]
    out += epi.epilogue_end()
    return out
