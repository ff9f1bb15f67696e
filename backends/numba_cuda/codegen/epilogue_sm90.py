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
from ...gpu import sm90
from .epilogue import EpilogueWriter, Layout

TY, TX = 4, 32          # the warpgroup's warps x lanes in the epilogue layout


def staging_pitch(bn):
    """fp32 elements per staged row: bn + 8 puts the fragment's row pairs g, g + 8 in different
    bank halves."""
    return bn + 8


def staged_rows(pingpong):
    """Rows one warpgroup stages and evaluates per tile."""
    return 2 * sm90.WG_ROWS if pingpong else sm90.WG_ROWS


def _writer(program, bn, deterministic, pingpong):
    lay = Layout(TY, TX, staged_rows(pingpong) // TY, bn // TX, rows_unrolled=False)
    return EpilogueWriter(program, lay, deterministic, barrier="named_bar_sync(1 + wg, 128)",
                          row_park=("stg", staging_pitch(bn)))


class SmemLayout:
    """Byte offsets inside the 1024-aligned dynamic shared memory: the ring (STAGES x (A, B)),
    then the fp32 staging (one 64-row buffer per consumer warpgroup, or one shared 128-row
    buffer for ping-pong: the same bytes), then per consumer warpgroup its reduction scratch,
    then the mbarriers."""

    def __init__(self, program, bn, stages, deterministic, pingpong=False):
        self.pitch = staging_pitch(bn)
        self.ring = stages * sm90.stage_bytes(bn)
        self.staging_bytes = staged_rows(pingpong) * self.pitch * 4
        self.staging = self.ring
        self.scratch_bytes = (_writer(program, bn, deterministic, pingpong).scratch_size * 4 + 15) // 16 * 16
        self.scratch = self.staging + (1 if pingpong else 2) * self.staging_bytes
        self.bars = (self.scratch + 2 * self.scratch_bytes + 7) // 8 * 8
        self.used = self.bars + 16 * stages
        self.total = self.used + sm90.SWIZZLE_ALIGN      # slack to round the base up to 1024
        self.bn = bn
        self.pingpong = pingpong


def epilogue_lines(program, lay, frags, deterministic):
    """Per tile, after the consumer's final wgmma wait: names m0, n0, mt, nt, l, wg, tid, it and
    the accumulator tuples `frags` (one per 64 rows: one cooperative, two ping-pong)."""
    epi = _writer(program, lay.bn, deterministic, lay.pingpong)
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
        for j in range(len_acc(lay.bn) // 4):
            out.append(f"sts_frag(stg, fr + {r0 + 8 * j}, fr + {r0 + 8 * P + 8 * j}, "
                       f"({acc}[{4 * j}], {acc}[{4 * j + 1}], {acc}[{4 * j + 2}], {acc}[{4 * j + 3}]))")
    out.append("named_bar_sync(1 + wg, 128)   # the fragments are staged")
    out += epi.prologue()
    out += epi.chunk(lambda i, j: f"lds(stg, (ty + {i} * {TY}) * {P} + tx + {j * TX})", row0="m0w")
    if lay.pingpong:
        out += ["if tile + cuda.gridDim.x < tiles:",
                "    named_bar_arrive(6 - wg, 256)   # stg is free for the other warpgroup's next tile"]
    out += epi.epilogue_end()
    return out


def len_acc(bn):
    """fp32 accumulators per thread of one m64nBN fragment."""
    return bn // 2
