"""Language-independent facts of the sm_90a warp-specialised GEMM (hopper-gemm-notes §5-9), for
every backend that generates it: tile geometry, shared-memory sizes, the wgmma shared-memory
descriptor fields, the m64nN accumulator fragment's (row, column) map, the persistent grouped
tile order and the TMA boxes of the A and B operands. Generated kernels spell these in their
own language; the numbers live here once.

CTA = 3 warpgroups of 128 threads: WG0 produces (one thread issues every TMA load), WG1 and
WG2 consume, each owning 64 rows of the BM x BN tile. Operand tiles are BK = 64 16-bit elements
(128 bytes) wide and 128B-swizzled, so every tile base must be 1024-byte aligned.
"""
BM = 128                    # rows per CTA tile (two consumer warpgroups x 64)
BK = 64                     # k per ring stage: one 128-byte swizzle row of 16-bit data
WG_ROWS = 64                # rows per consumer warpgroup (one m64 wgmma fragment)
THREADS = 384               # producer WG + two consumer WGs
PRODUCER_REGS = 40          # setmaxnreg.dec: the producer needs few registers...
CONSUMER_REGS = 232         # ...so the consumers get 232 (40*128 + 232*256 <= 64K registers)
GROUP_M = 8                 # m-tiles walked together in the grouped tile order (L2 reuse)
SWIZZLE_ALIGN = 1024        # 8 rows x 128 B: the 128B-swizzle atom, so tile bases align to it
PANEL = 64                  # rows and columns of a panel: 64 16-bit elements are one 128-byte swizzle row
PANEL_BYTES = PANEL * PANEL * 2   # a 64 x 64 16-bit panel (the N-major B sub-tile and the store box)
A_HALF_BYTES = WG_ROWS * BK * 2    # the second consumer's rows of A start this far into a stage
K16_STEPS = BK // 16        # wgmma k16 instructions per stage
MAX_DYNAMIC_SHARED = 232448  # bytes a block may opt into on sm_90 (227 KB)


def a_stage_bytes():
    return BM * BK * 2


def b_stage_bytes(bn):
    return bn * BK * 2


def stage_bytes(bn):
    """Bytes one ring stage holds (A then B): also the mbarrier transaction count per stage,
    full boxes even where TMA zero-fills past the problem's edges."""
    return a_stage_bytes() + b_stage_bytes(bn)


# wgmma shared-memory matrix descriptor (128-byte swizzle), hopper-gemm-notes §7:
#   bits 0-13 enc(start), 16-29 enc(LBO), 32-45 enc(SBO), 62-63 layout (1 = 128B swizzle),
#   enc(x) = (x & 0x3FFFF) >> 4.
DESC_SWIZZLE_128B = 1 << 62
# (bytes the start address advances per k16 step, leading-dimension byte offset, stride-dimension
# byte offset). K-major tiles: rows of 64 k; LBO is ignored for swizzled K-major operands; SBO is
# 8 rows x 128 B. N-major B ((K, N) row-major input): 64-column panels of 64 k-rows, LBO = the
# stride between panels, SBO = 8 k-rows x 128 B; a swapped LBO/SBO failed every GPU check.
DESC_K_MAJOR = (32, 16, 1024)
DESC_N_MAJOR = (2048, PANEL_BYTES, 1024)   # also an M-major A's panels (64 M-columns of BK k-rows)


def a_kmajor(a_strides):
    """True: A (element strides (sL, sM, sK)) is read K-major, one box per stage; False: it is
    M-contiguous (a weight gradient's transposed activations), read as 64-column panels laid out
    like an N-major B and multiplied with wgmma's transpose-A bit."""
    return a_strides[2] == 1


def desc_encode(x):
    return (x & 0x3FFFF) >> 4


def descriptor(addr, lbo, sbo):
    """The 64-bit descriptor value (a reference for tests; kernels build it in their language)."""
    return desc_encode(addr) | desc_encode(lbo) << 16 | desc_encode(sbo) << 32 | DESC_SWIZZLE_128B


def fragment_position(i, warp, lane):
    """(row, column) inside the warpgroup's 64 x N block of accumulator register i of an
    m64nNk16 wgmma, for the thread (warp of the WG, lane): d[4j + {0,1}] sit at row
    16 warp + lane/4, columns 8j + 2(lane%4) + {0,1}; d[4j + {2,3}] eight rows lower."""
    j, e = divmod(i, 4)
    return 16 * warp + lane // 4 + 8 * (e // 2), 8 * j + 2 * (lane % 4) + e % 2


def tile_coords(t, mtiles, ntiles, group_m=GROUP_M):
    """(l, mt, nt) of persistent tile index t: batches outermost, then groups of group_m m-tiles
    walked column by column, so a wave of CTAs shares A rows and B columns in L2."""
    per_batch = mtiles * ntiles
    l, r = divmod(t, per_batch)
    group = r // (group_m * ntiles)
    first_m = group * group_m
    rows = min(mtiles - first_m, group_m)
    rr = r - group * group_m * ntiles
    return l, first_m + rr % rows, rr // rows


def operand_maps(L, M, N, K, a_strides, b_strides, b_kmajor, bn, bm=BM, a_kmajor=True):
    """TMA maps of A and B as (dims innermost first, byte strides of dims[1:], box), element
    strides as bind gives them: a (sL, sM, sK), b (sL, sK, sN), 16-bit data. A batch stride of
    0 (one operand for every batch) gives a 2-D map that the kernel addresses without l; a batched
    operand gets a 3-D map even for L == 1 (the kernel's coordinates decide the rank)."""
    (aL, aM, aK), (bL, bK, bN) = a_strides, b_strides

    def mk(inner, outer, row_stride, batch_stride, box):
        if batch_stride:
            return (inner, outer, L), (row_stride * 2, batch_stride * 2), box + (1,)
        return (inner, outer), (row_stride * 2,), box
    if a_kmajor:
        a = mk(K, M, aM, aL, (BK, bm))
    else:      # (M, K) with unit M stride: 64-row panels of BK K rows, bm/64 boxes per stage
        a = mk(M, K, aK, aL, (64, BK))
    if b_kmajor:
        b = mk(K, N, bN, bL, (BK, bn))
    else:      # (K, N) row-major: 64-column panels, BN/64 boxes per stage
        b = mk(N, K, bK, bL, (64, BK))
    return a, b


def panel_map(L, M, N, strides, batched, item=2):
    """TMA map geometry (dims innermost first, byte strides of dims[1:], box) of an (L, M, N)
    epilogue tensor (element strides (sL, sM, 1)) read or written as 64 x 64 panels with the
    128B swizzle: a TMA-stored output or a TMA-loaded (M, N) input. `batched`: a 3-D map
    addressed with the batch index (a tensor spanning L in a batched program), else 2-D."""
    sL, sM, _ = strides
    if batched:
        return (N, M, L), (sM * item, sL * item), (PANEL, PANEL, 1)
    return (N, M), (sM * item,), (PANEL, PANEL)


def tma_rows_ok(ptr, row_stride, batch_stride, item=2):
    """TMA's address rules: 16-byte aligned base and 16-byte multiples as strides."""
    return ptr % 16 == 0 and (row_stride * item) % 16 == 0 and (batch_stride * item) % 16 == 0


def aux_ring_geometry(inputs, tile_rows, bn, stage):
    """(M, N) epilogue inputs streamed through the mainloop ring (the positions after a tile's
    k-blocks, TMA-loaded as 64 x 64 128B-swizzled panels): (groups per tile, groups per ring
    stage, ring stages per tile) for `inputs` 16-bit inputs, a tile of tile_rows x bn and ring
    stages of `stage` bytes. A group is one 64-row half h and 64-column panel c of every input:
    `inputs` consecutive 8 KB panels inside one stage (so the epilogue keeps one address per
    panel), group g = h * (bn / 64) + c. Stages per tile is None when a stage cannot hold a group."""
    groups = (tile_rows // PANEL) * (bn // PANEL)
    per_stage = stage // (PANEL_BYTES * inputs)
    return groups, per_stage, (-(-groups // per_stage) if per_stage else None)


def ring_holds_aux(aux_stages, stages):
    """A tile's aux stages stay held through its epilogue; the ring needs at least one more stage
    so that the next tile's mainloop streams meanwhile (and a group must fit a stage)."""
    return aux_stages is not None and aux_stages <= stages - 1
