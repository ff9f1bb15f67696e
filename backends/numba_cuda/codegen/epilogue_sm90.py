"""The sm_90a kernel's epilogue: each consumer warpgroup stages its 64 x BN wgmma fragment (fp32)
through its own shared-memory buffer into the thread layout of EpilogueWriter (thread (ty, tx)
of 4 x 32 owns rows ty + 4i and columns tx + 32j), then runs the generated epilogue there.

Why staging instead of evaluating the tree on the fragment itself: the EpilogueWriter is what
every op, reduction (row / col / all / elem, MEAN counts, AMIN carried negated) and the
deterministic mode are written for; in its layout consecutive lanes touch consecutive columns,
so aux loads and output stores are coalesced without per-output shared-memory staging, and the
64 accumulators die before the epilogue starts, which keeps the consumer far from its 232
registers. Row reductions park each lane's row partial in the staged element it has just read
and combine a warp's 16 rows after the row loop (EpilogueWriter row_park): a shuffle chain and a
global combine inside every trip of the loop serialised it (W3 and W4 paid 2-3 x the bare GEMM). The two consumer warpgroups never wait for each other: each has its own staging and
reduction scratch and synchronises on its own named barrier (ids 1 and 2; 0 is __syncthreads).
"""
from ...gpu import sm90
from .epilogue import EpilogueWriter, Layout

TY, TX = 4, 32          # the warpgroup's warps x lanes in the epilogue layout


def staging_pitch(bn):
    """fp32 elements per staged row: bn + 8 puts the fragment's row pairs g, g + 8 in different
    bank halves."""
    return bn + 8


def _writer(program, bn, deterministic):
    lay = Layout(TY, TX, sm90.WG_ROWS // TY, bn // TX, rows_unrolled=False)
    return EpilogueWriter(program, lay, deterministic, barrier="named_bar_sync(1 + wg, 128)",
                          row_park=("stg", staging_pitch(bn)))


class SmemLayout:
    """Byte offsets inside the 1024-aligned dynamic shared memory: the ring (STAGES x (A, B)),
    then per consumer warpgroup its fp32 staging (64 rows of staging_pitch floats) and its
    reduction scratch, then
    the mbarriers."""

    def __init__(self, program, bn, stages, deterministic):
        self.pitch = staging_pitch(bn)
        self.ring = stages * sm90.stage_bytes(bn)
        self.staging_bytes = sm90.WG_ROWS * self.pitch * 4
        self.staging = self.ring
        self.scratch_bytes = (_writer(program, bn, deterministic).scratch_size * 4 + 15) // 16 * 16
        self.scratch = self.staging + 2 * self.staging_bytes
        self.bars = (self.scratch + 2 * self.scratch_bytes + 7) // 8 * 8
        self.used = self.bars + 16 * stages
        self.total = self.used + sm90.SWIZZLE_ALIGN      # slack to round the base up to 1024
        self.bn = bn


def epilogue_lines(program, lay, n_acc, deterministic):
    """Per tile, after the consumer's final wgmma wait: names m0, n0, mt, nt, l, wg, tid, acc."""
    epi = _writer(program, lay.bn, deterministic)
    P = lay.pitch
    out = ["# ---- fused epilogue: stage the fragment, then evaluate the tree in the SIMT layout ----",
           "ty = tid // 32    # warp of the warpgroup",
           "tx = tid % 32",
           "fg = tx // 4      # fragment row group",
           "fq = tx % 4       # fragment column pair",
           f"stg = sbase + {lay.staging} + wg * {lay.staging_bytes}",
           f"scratch = sbase + {lay.scratch} + wg * {lay.scratch_bytes}",
           f"m0w = m0 + {sm90.WG_ROWS} * wg     # this warpgroup's first row",
           "tile_m = mt * 2 + wg   # deterministic partial slot: one per 64-row block",
           "tile_n = nt",
           "named_bar_sync(1 + wg, 128)   # the previous tile's epilogue is done reading stg",
           # fragment_position: d[4j + e] sits at row 16 ty + fg + 8 (e // 2), column 8j + 2 fq + e % 2
           f"fr = (16 * ty + fg) * {P} + 2 * fq"]
    for j in range(n_acc // 4):
        out.append(f"sts_frag(stg, fr + {8 * j}, fr + {8 * P + 8 * j}, "
                   f"(acc[{4 * j}], acc[{4 * j + 1}], acc[{4 * j + 2}], acc[{4 * j + 3}]))")
    out.append("named_bar_sync(1 + wg, 128)   # the fragment is staged")
    out += epi.prologue()
    out += epi.chunk(lambda i, j: f"lds(stg, (ty + {i} * {TY}) * {P} + tx + {j * TX})", row0="m0w")
    out += epi.epilogue_end()
    return out
