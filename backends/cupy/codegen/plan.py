"""What one generated kernel is specialised on, as frozen data (part of the compile-cache key).

`Spec` is decided per call from the bound arrays (dtypes, which operand layouts allow vector or
TMA access); `TileConfig` is the tile shape the autotuner picks. Together with the Program they
determine the generated source completely.
"""
import re
from dataclasses import dataclass

from evt_core.tree.ops import Op

from ...gpu.reductions import ALL, COL, ELEM, ROW, reduction_kind  # noqa: F401 - the cupy codegen's names

# how an epilogue tensor runs along N (the pair of adjacent columns each thread handles):
N_BROADCAST = "0"     # stride 0 along N: one load serves both columns
N_UNIT_PAIR = "1v"    # unit stride and pair-aligned: one 4/8-byte access per pair
N_UNIT = "1"          # unit stride, not pair-aligned
N_GENERIC = "g"       # any other stride

REDUCE_OPS = (Op.SUM, Op.MEAN, Op.AMAX, Op.AMIN)


@dataclass(frozen=True)
class Spec:
    dtype: str               # of A and B
    mainloop: str            # "sm80" | "sm90"
    a_load: str              # "tma" | "async" | "scalar"
    b_load: str              # "tma" | "async" | "scalar"
    b_kmajor: bool           # B has unit stride along K (an (N, K) array transposed)
    a_batched: bool          # A has a non-zero L stride
    b_batched: bool
    in_classes: tuple        # N_* per program input
    out_classes: tuple       # N_* per program output
    tma_out: int             # index of the output written by TMA stores (sm90), or -1
    deterministic: bool
    # fast paths (backend options aux_tma / tma_store_all / fast_math; on by default where the
    # layouts and shared memory allow, see select.decide_spec):
    tma_extra: tuple = ()    # further outputs written by TMA stores after tma_out (tma_store_all)
    aux_tma: tuple = ()      # M x N 16-bit inputs the producer TMA-loads into shared memory (aux_tma)
    fast_math: bool = False  # every op in its tanh.approx / ex2.approx / rcp.approx spelling (fast_math=True)
    fast_ops: tuple = ()     # instruction indices spelled fast (fast_math="auto": values that reach
                             # only 16-bit stores)
    direct_reds: tuple = ()  # reductions whose CTA combines go straight into their fp32 output
                             # (atomic mode, no MEAN, dense layout): no evt_finish pass for them
    tile_vecs: bool = True   # sm90: stage broadcast vectors per tile in shared memory (tile_vectors)
    a_kmajor: bool = True    # sm90: A has unit stride along K; False: unit stride along M (option
                             # a_mn_major_tma), loaded in 64-row panels and fed to wgmma transposed
    aux_ring: bool = True    # sm90: aux_tma inputs travel through the mainloop's ring as the stages
                             # after a tile's k-blocks (option aux_ring; False: a buffer of their own)
    split_k: int = 1         # sm90 cooperative: K split over this many CTAs per tile (option
                             # split_k; codegen/sm90_splitk.py)


def tma_outputs(spec):
    """Every output index written through smem staging + TMA stores, in staging-slot order."""
    return ((spec.tma_out,) + tuple(spec.tma_extra)) if spec.tma_out >= 0 else ()


@dataclass(frozen=True)
class TileConfig:
    bm: int
    bn: int
    bk: int
    warps_m: int = 2         # sm80 only: warp grid of the CTA
    warps_n: int = 4
    stages: int = 4
    group_m: int = 8         # grouped tile order for L2 reuse
    pingpong: bool = False   # sm90 only: each consumer warpgroup owns whole bm x bn tiles and the
                             # two alternate, so one's epilogue overlaps the other's mainloop
    overlap: bool = False    # sm90 only, 128 x 128 cooperative: two accumulator sets, a tile's
                             # epilogue in pieces between the next tile's k-blocks
                             # (codegen/sm90_overlap.py; refused kinds run cooperative)

    def label(self):
        return (f"{self.bm}x{self.bn}x{self.bk}/w{self.warps_m}x{self.warps_n}/s{self.stages}"
                + ("/g16" if self.group_m != 8 else "") + ("/pp" if self.pingpong else "")
                + ("/ov" if self.overlap else ""))

    @classmethod
    def from_label(cls, text):
        """The inverse of label(): "128x128x64/w2x4/s6/ov" -> TileConfig(128, 128, 64, stages=6,
        overlap=True); parts after the shape may be left out (their defaults). For benchmark
        command lines (bench.run's "cupy:tile=128x128x64/s6/ov")."""
        shape, *parts = text.split("/")
        m = re.fullmatch(r"(\d+)x(\d+)x(\d+)", shape)
        if not m:
            raise ValueError(f"tile label {text!r}: expected BMxBNxBK first, e.g. 128x128x64/s6/ov")
        kw = {}
        for part in parts:
            w, s = re.fullmatch(r"w(\d+)x(\d+)", part), re.fullmatch(r"s(\d+)", part)
            if w:
                kw.update(warps_m=int(w[1]), warps_n=int(w[2]))
            elif s:
                kw["stages"] = int(s[1])
            elif part in ("g16", "pp", "ov"):
                kw[{"g16": "group_m", "pp": "pingpong", "ov": "overlap"}[part]] = 16 if part == "g16" else True
            else:
                raise ValueError(f"tile label {text!r}: unknown part {part!r} (w<m>x<n>, s<stages>, g16, pp, ov)")
        return cls(*map(int, m.groups()), **kw)


def row_block(spec, cfg):
    """Rows covered by one reduction partial: 64 on sm90 (a consumer warpgroup's rows in the
    cooperative schedule, one m64 fragment of a ping-pong tile), the CTA tile on sm80.
    Deterministic partial slots are numbered by these blocks."""
    return 64 if spec.mainloop == "sm90" else cfg.bm


VEC_ROW, VEC_COL = "row", "col"
_VEC_ITEM = {"float32": 4, "float16": 2, "bfloat16": 2}


def tile_vectors(program, spec):
    """sm90: the broadcast-vector inputs staged once per tile in shared memory, as
    {input index: (VEC_ROW | VEC_COL, byte offset in a consumer warpgroup's vector buffer)}.
    A row vector spans N and not M (a bias[N]), a column vector M and not N (a scale[M]); each
    consumer thread loads its share before the tile's mainloop and stores it after, so the
    epilogue reads a shared-memory word per column pair instead of a global load per fragment
    element. Slots are sized for the largest tile (256 columns, 128 rows of one warpgroup's tile)
    in the input's storage type, so the layout does not depend on the TileConfig."""
    if spec.mainloop != "sm90" or not spec.tile_vecs:
        return {}
    out, off = {}, 0
    for k, op in enumerate(program.inputs):
        _, sm, sn = program.spans(op)
        if sm == sn:
            continue
        kind = VEC_ROW if sn else VEC_COL
        out[k] = (kind, off)
        off += (256 if kind == VEC_ROW else 128) * _VEC_ITEM[op.dtype]
    return out


def tile_vector_bytes(program, spec):
    """Bytes of one consumer warpgroup's tile-vector buffer (a multiple of 16)."""
    tv = tile_vectors(program, spec)
    if not tv:
        return 0
    k, (kind, off) = max(tv.items(), key=lambda kv: kv[1][1])
    end = off + (256 if kind == VEC_ROW else 128) * _VEC_ITEM[program.inputs[k].dtype]
    return (end + 15) // 16 * 16
