"""The shared-memory layout of the sm_90a kernel's fragment epilogue (epilogue_fragment.py): the
mainloop ring, the outputs' 128B-swizzled staging panels, the (M, N) inputs' cp.async buffers
(or none: aux_ring), the column vectors' per-tile slices, the reduction scratch and the
mbarriers, in that order, and how deep a ring that leaves room for (deepest_ring)."""
from evt_core.dtypes import DTYPES

from ...gpu import sm90
from ...gpu.reductions import reduction_kind
from .epilogue_sm90 import deepest_ring, tile_inputs

AUX_PITCH = 128 + 8                 # elements per cp.async-staged input row (an 8-element pad per row)


class FragLayout:
    """Byte offsets inside the 1024-aligned dynamic shared memory: the ring, then per output its
    staging of 8 KB 64 x 64 panels, `out_panels` per 64-row half (half h's buffer b at
    (h out_panels + b) x 8 KB; cooperative warpgroup w owns row half w, a ping-pong tile both),
    then (cooperative) per (M, N) input one padded 64-row buffer per warpgroup, then per column
    vector (an input spanning N only) its tile's bn values as fp32 per warpgroup, then per
    warpgroup its reduction scratch, then the mbarriers. The ring is the deepest of STAGES..2
    that fits (bn = 256: 48 KB a slot, so three beside one output's whole staging, or beside
    two outputs' recycled panel buffers; with aux_ring a 128 x 256 tile's (M, N) input takes two
    of them after its k-blocks)."""

    def __init__(self, program, bn, deterministic, pingpong, stages=None, aux_ring=False, out_panels=None):
        assert bn % sm90.PANEL == 0 and bn <= 4 * sm90.PANEL, "64-column panels, at most m64n256"
        aux_ring = bool(aux_ring and tile_inputs(program))
        # a cp.async-copied input's rows are AUX_PITCH = 128 + 8 wide; ring panels take any width
        assert bn == 2 * sm90.PANEL or aux_ring or not tile_inputs(program), "copied (M, N) inputs need BN = 128"
        assert not (aux_ring and pingpong), "the ring's aux groups are read by both cooperative warpgroups"
        if out_panels is None:
            out_panels = _staging_panels(program, bn, deterministic, pingpong, stages, aux_ring)
        if stages is None:
            stages = deepest_ring(lambda n: FragLayout(program, bn, deterministic, pingpong, n, aux_ring, out_panels))
        self.stages, self.bn, self.pingpong, self.aux_ring = stages, bn, pingpong, aux_ring
        self.panels = bn // sm90.PANEL
        self.ring = stages * sm90.stage_bytes(bn)
        # aux_ring: the (M, N) inputs are TMA-loaded into the ring positions after each tile's
        # k-blocks (mainloop_sm90._aux_ring_loads), `aux_stages` of them, so they need no buffer
        self.ring_inputs = tile_inputs(program) if aux_ring else []
        self.aux_groups, self.aux_per_stage, self.aux_stages = (
            sm90.aux_ring_geometry(len(self.ring_inputs), sm90.BM, bn, sm90.stage_bytes(bn)) if aux_ring
            else (0, 0, 0))
        self.out_panels = out_panels
        self.out_bytes = 2 * self.out_panels * sm90.PANEL_BYTES
        self.outs = [self.ring + k * self.out_bytes for k in range(len(program.outputs))]
        end = self.ring + len(program.outputs) * self.out_bytes
        self.aux = {}           # cp.async: input index -> (offset of warpgroup 0's buffer, bytes per warpgroup)
        for k in ([] if pingpong or aux_ring else tile_inputs(program)):
            size = sm90.WG_ROWS * AUX_PITCH * DTYPES[program.inputs[k].dtype].itemsize
            self.aux[k] = (end, size)
            end += 2 * size
        self.aux_async = bool(self.aux)
        self.vec_bytes = 4 * bn     # a column vector's tile slice, widened to fp32
        self.vecs = {}              # input index -> offset of warpgroup 0's slice (warpgroup 1's follows)
        for k in column_vectors(program):
            self.vecs[k] = end
            end += 2 * self.vec_bytes
        # a column partial per warp and column (or a word per warp); none without a column or
        # whole-tile reduction: its 4-8 KB are one more ring slot for a plain epilogue
        needs = any(reduction_kind(r) in ("col", "all") for r in program.reductions)
        self.scratch_bytes = 4 * 4 * bn if needs else 0
        self.scratch = end
        self.bars = (end + 2 * self.scratch_bytes + 7) // 8 * 8
        self.used = self.bars + 16 * stages
        self.total = self.used + sm90.SWIZZLE_ALIGN
        self.fits = (self.total <= sm90.MAX_DYNAMIC_SHARED and stages >= 2
                     and (not aux_ring or sm90.ring_holds_aux(self.aux_stages, stages)))

    @property
    def recycles(self):
        """Whether a warpgroup's panels take turns in fewer staging buffers (_staging_panels)."""
        return self.out_panels < self.panels

    def aux_row_bytes(self, k, program):
        return AUX_PITCH * DTYPES[program.inputs[k].dtype].itemsize


def _staging_panels(program, bn, deterministic, pingpong, stages, aux_ring):
    """Staging buffers per 64-row half and output. A tile has bn / 64 column panels per half.
    Ping-pong stages them all (its warpgroups hand one staging over whole tiles). A cooperative
    warpgroup may recycle two buffers (panel c in buffer c % 2, TMA-stored as soon as it is
    written: fragment_stores.panel_store), so a 128 x 256 tile's 16-bit output takes 32 KB
    instead of 64 (two outputs beside a 3-slot ring, one beside 4 slots) at the price of a
    barrier per panel and the live values across it. Invariant: recycling only where the whole
    staging leaves no ring of three slots (two outputs, two (M, N) inputs through the ring);
    the kinds measured at 128 x 256 with their whole staging keep it (a fourth slot for a plain
    store is not measured; W4's layer-norm statistics keep three slots either way, and
    recycling them spilled 2 registers)."""
    whole = bn // sm90.PANEL
    if pingpong or whole <= 2:
        return whole

    def layout(panels):
        return FragLayout(program, bn, deterministic, pingpong, stages, aux_ring, panels)
    full, turns = layout(whole), layout(2)
    return 2 if turns.fits and turns.stages >= 3 and not (full.fits and full.stages >= 3) else whole


def column_vectors(program):
    """Indices of the inputs with a value per column only (a bias): staged per tile in shared
    memory (vector_loads, _Writer._head) instead of loaded by every thread for every column group."""
    return [k for k, t in enumerate(program.inputs) if program.spans(t)[2] and not program.spans(t)[1]]
