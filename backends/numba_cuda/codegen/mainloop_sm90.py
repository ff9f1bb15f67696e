"""Source of the sm_90a fused kernel: persistent, warp-specialised, TMA loads into a 128B-swizzled
full/empty mbarrier ring, wgmma m64nBNk16 from shared memory, fp32 accumulate
(hopper-gemm-notes §5-9, the design the cupy backend runs; numbers from backends/gpu/sm90.py).
The tile width BN is a field of the variant (select.sm90_tile_n): 128 (m64n128k16, 64 fp32
accumulators per thread) or 256 (m64n256k16, 128 accumulators; cooperative schedule and the
fragment epilogue only, where the shared memory holds it).

CTA = 384 threads. WG0 is the producer (setmaxnreg 40; its thread 0 issues every TMA load);
WG1 and WG2 are consumers (setmaxnreg 232). Cooperative schedule (_consumer): both consumers
work on every 128 x BN tile, 64 rows each; ping-pong (_consumer_pingpong): they take whole
tiles in turn, so one's epilogue overlaps the other's mainloop. Tiles are visited persistently
in grouped order; the producer fills the ring for the next tile while a tile's epilogue runs.
A slot is released one k-block late (wait_group 1), so one wgmma group stays in flight. Every
mbarrier wait is bounded (ptx_sm90.mbar_wait).

The epilogue runs on the fragments and TMA-stores the outputs (epilogue_fragment.py) where the
call allows it, else (epilogue_sm90.py) stages each consumer's fragment through shared memory
into the thread layout EpilogueWriter expects, so every op, reduction and deterministic mode of
the mma.sync kernel works unchanged.
"""
from ...gpu import sm90
from . import epilogue_fragment, splitk
from .frag_layout import FragLayout
from .epilogue_sm90 import SmemLayout, aux_copy_lines, epilogue_lines, tile_inputs
from .abi import Param, arg_list, main_params

# columns per CTA tile (BN) a variant may take: m64n128k16 (64 fp32 accumulators per thread), the
# default, or m64n256k16 (128 accumulators; select.sm90_tile_n says where)
BN_DEFAULT, BN_WIDE = 128, 256
TILE_WIDTHS = (BN_DEFAULT, BN_WIDE)
STAGES = 6                        # deepest ring (cupy's autotuner measured 5-6 slots best at 128 x 128);
                                  # fewer where the epilogue's buffers need the room (deepest_ring)
WAIT_FULL, WAIT_EMPTY = 1, 2      # watchdog codes: which wait timed out


def sm90_params(program, frag=False, aux_ring=False, split=False):
    """main_params, then what only this kernel takes: the tensor maps (global-memory addresses)
    of A, B, (fragment epilogue) every output and (aux_ring) every (M, N) input, the watchdog
    word, the tile counts and (split) split-K's count, partials and counters (splitk.PARAMS)."""
    outs = [Param(f"tmO{k}", "ptr") for k in range(len(program.outputs))] if frag else []
    auxs = [Param(f"tmX{x}", "ptr") for x in range(len(tile_inputs(program)))] if aux_ring else []
    return main_params(program) + [Param("tmA", "ptr"), Param("tmB", "ptr"), *outs, *auxs, Param("werr", "ptr"),
                                   Param("tiles_m", "int"), Param("tiles_n", "int"), *splitk.params(split)]


def smem_layout(program, deterministic, pingpong, aux_async, frag, bn=BN_DEFAULT, aux_ring=False):
    """The shared-memory layout of a variant: the fragment epilogue's or the staged one's."""
    if frag:
        return FragLayout(program, bn, deterministic, pingpong, aux_ring=aux_ring)
    return SmemLayout(program, bn, deterministic, pingpong, aux_async)


def module_prelude(ab_dtype, b_kmajor, a_kmajor=True, bn=BN_DEFAULT):
    """Module-level lines of the generated source: the intrinsics, this variant's wgmma
    (m64n{bn}k16: bn / 2 fp32 accumulators per thread), the undefined accumulators a tile starts
    from (its first wgmma overwrites them) and the no-instruction tie of a second fragment."""
    ab = "bf16" if ab_dtype == "bfloat16" else "f16"
    a_layout = "" if a_kmajor else ", False"
    n_acc = bn // 2
    return (f"from {__package__}.ptx_sm90 import *\n"
            f"wg_fence, wg_mma, wg_commit, wg_wait1, wg_wait0 = wgmma_ops({n_acc}, {ab!r}, {b_kmajor}{a_layout})\n"
            f"acc_undef, wg_tie = undef_accumulators({n_acc}), accumulator_tie({n_acc})\n")


def sm90_source(program, ab_dtype, b_kmajor, a_batched, b_batched, deterministic, pingpong=False,
                aux_async=False, frag=False, fast=(), a_kmajor=True, bn=BN_DEFAULT, aux_ring=False, overlap=False,
                split=False):
    """aux_async: the epilogue's (M, N) inputs are copied into shared memory by cp.async while
    the tile's mainloop runs (epilogue_sm90.aux_copy_lines), instead of loaded per row.
    frag: the tree is evaluated on the fragments and the outputs TMA-stored (epilogue_fragment;
    its layout stages every (M, N) input of a cooperative kernel); fast: the instructions it
    spells with MUFU approximations (backends/gpu/fastmath.fast_ops); a_kmajor: False for an
    M-contiguous A (backends/gpu/sm90.a_kmajor); bn: the tile width, one of TILE_WIDTHS (256:
    cooperative with the fragment epilogue only: ping-pong would hold 256 accumulators per
    thread, and the staged epilogue's fp32 staging leaves no room for a ring); aux_ring: the
    (M, N) inputs are TMA-loaded by the producer into the ring positions after each tile's
    k-blocks (cooperative fragment epilogue; _aux_ring_loads, _aux_ring_wait, _aux_ring_release);
    overlap: the cooperative schedule with two accumulator sets, a tile's epilogue between the
    next tile's k-blocks (consumer_overlap.py; 128 x 128, fragment epilogue, no cp.async copies);
    split: serial split-K over (tile, split) units (splitk.py; cooperative, no (M, N) inputs)."""
    assert not split or not (pingpong or overlap or tile_inputs(program)), "split-K: see splitk.py"
    assert bn in TILE_WIDTHS and (bn == BN_DEFAULT or (frag and not pingpong)), (bn, frag, pingpong)
    assert not aux_ring or (frag and not pingpong), "aux_ring: the cooperative fragment epilogue"
    lay = smem_layout(program, deterministic, pingpong, aux_async, frag, bn, aux_ring)
    stages = lay.stages
    body = [
        "smem = cuda.shared.array(0, uint8)",
        "sbase = smem_align1024(smem)     # 1024-aligned: the swizzle atom",
        f"bars = sbase + {lay.bars}        # full[s] at bars + 8s, empty[s] at bars + 8({stages} + s)",
        "thread = cuda.threadIdx.x",
        "wgid = warp_uniform(thread // 128)   # 0 producer, 1 and 2 consumers",
        "tid = thread % 128",
        f"tiles = L * tiles_m * tiles_n",
        f"ktiles = udiv32(K + {sm90.BK - 1}, {sm90.BK})",
        *(["units = tiles * splits"] if split else []),
        "if thread == 0:",
        f"    for s in range({stages}):",
        "        mbar_init(bars + 8 * s, 1)            # full: the producer's expect_tx arrival",
        f"        mbar_init(bars + 8 * ({stages} + s), {1 if pingpong else 2})  # empty: one arrival per "
        "consumer warpgroup reading the slot",
        "    fence_barrier_init()",
        "cuda.syncthreads()",
        "if wgid == 0:",
    ]
    body += ["    " + s for s in _producer((a_kmajor, b_kmajor), a_batched, b_batched, stages, bn,
                                         _aux_ring_loads(program, lay), split)]
    body.append("else:")
    from . import consumer_overlap     # (here: it imports this module's k-block pieces)
    if overlap:
        assert frag and not pingpong and bn == BN_DEFAULT and not lay.aux, "overlap: see consumer_overlap.py"
        tail = consumer_overlap.consumer_overlap(program, (a_kmajor, b_kmajor), deterministic, lay)
    else:
        epilogue = (epilogue_fragment.fragment_lines if frag else epilogue_lines)
        args = (program, (a_kmajor, b_kmajor), deterministic, lay, epilogue,
                epilogue_fragment.vector_loads(program, lay) if frag else [])
        tail = _consumer_pingpong(*args) if pingpong else _consumer(*args, split=split)
    if frag:
        tail = tail[:2] + epilogue_fragment.consumer_prologue(program) + tail[2:] + \
            epilogue_fragment.consumer_epilogue()
    body += ["    " + s for s in tail]
    preload = overlap and consumer_overlap.preloaded(lay)
    head = epilogue_fragment.device_functions(program, lay, fast, preload) + "\n\n" if frag else ""
    if overlap:
        head += consumer_overlap.device_functions((a_kmajor, b_kmajor), lay) + "\n\n"
    params = arg_list(sm90_params(program, frag, lay.aux_ring if frag else False, split))
    src = head + f"def evt_kernel({params}):\n" + "\n".join("    " + s if s else "" for s in body)
    return src + "\n"


def tile_coords(ind, bn, tile="tile", sfx=""):
    """(l, mt, nt, m0, n0) of tile `tile` in grouped order (backends/gpu/sm90.tile_coords), in
    u32 math; every name it sets ends in sfx."""
    g, x = sm90.GROUP_M, sfx
    lines = [f"per_batch{x} = tiles_m * tiles_n",
             f"l{x} = udiv32({tile}, per_batch{x})",
             f"r{x} = {tile} - l{x} * per_batch{x}",
             f"group{x} = udiv32(r{x}, {g} * tiles_n)",
             f"first_m{x} = group{x} * {g}",
             f"rows{x} = min(tiles_m - first_m{x}, {g})",
             f"rr{x} = r{x} - group{x} * {g} * tiles_n",
             f"mt{x} = first_m{x} + urem32(rr{x}, rows{x})",
             f"nt{x} = udiv32(rr{x}, rows{x})",
             f"m0{x} = mt{x} * {sm90.BM}",
             f"n0{x} = nt{x} * {bn}"]
    return [ind + x for x in lines]


def _producer(layouts, a_batched, b_batched, stages, bn, aux_loads=(), split=False):
    """aux_loads: (map names, lines after a tile's k-blocks) from _aux_ring_loads; split: the
    loop runs over split-K's work units, each a tile's k-blocks [kb0, kb1) (splitk.unit_loop)."""
    a_kmajor, b_kmajor = layouts
    stage = sm90.stage_bytes(bn)
    a_bytes = sm90.a_stage_bytes()

    def load(tm, dst, x, y, batched):
        return (f"tma_load_3d({dst}, {tm}, {x}, {y}, l, fb)" if batched else
                f"tma_load_2d({dst}, {tm}, {x}, {y}, fb)")
    if a_kmajor:
        a_loads = [load("tmA", "sa", "k0", "m0", a_batched)]
    else:      # M-contiguous A: 64-column panels of 64 k-rows, 8 KB apart, as an N-major B
        a_loads = [load("tmA", f"sa + {p * sm90.PANEL_BYTES}", f"m0 + {64 * p}", "k0", a_batched)
                   for p in range(sm90.BM // 64)]
    if b_kmajor:      # one box of bn rows of 64 k (TMA boxes reach 256 rows)
        b_loads = [load("tmB", "sb", "k0", "n0", b_batched)]
    else:      # (K, N) row-major: 64-column panels of 64 k-rows, 8 KB apart
        b_loads = [load("tmB", f"sb + {p * sm90.PANEL_BYTES}", f"n0 + {64 * p}", "k0", b_batched)
                   for p in range(bn // 64)]
    out = ["# ---- producer warpgroup: one thread streams every tile's k-blocks through the ring ----",
           "setmaxnreg_producer()",
           "if tid == 0:",
           "    tensormap_acquire(tmA)",
           "    tensormap_acquire(tmB)",
           *[f"    tensormap_acquire({tm})" for tm in (aux_loads[0] if aux_loads else [])],
           "    s = 0",
           "    ph = 0"]
    out += splitk.unit_loop("    ") if split else [
        "    tile = cuda.blockIdx.x", "    while tile < tiles:    # (a stepped range() would divide in int64: a CALL)"]
    out += tile_coords("        ", bn)
    out += [f"        for kb in range({'kb0, kb1' if split else 'ktiles'}):",
            f"            mbar_wait(bars + 8 * ({stages} + s), ph ^ 1, werr, {WAIT_EMPTY})   # consumers released slot s",
            "            fb = bars + 8 * s",
            f"            mbar_expect_tx(fb, {stage})   # full boxes: TMA zero-fills past the edges",
            f"            sa = sbase + s * {stage}",
            f"            sb = sa + {a_bytes}",
            f"            k0 = kb * {sm90.BK}"]
    out += ["            " + x for x in a_loads + b_loads]
    out += ["            " + x for x in _advance(stages)]
    out += ["        " + x for x in (aux_loads[1] if aux_loads else [])]
    out += ["        u = u + cuda.gridDim.x" if split else "        tile = tile + cuda.gridDim.x"]
    return out


def _advance(stages):
    """Ring slot s and phase ph one position on (the producer's and the consumers' step alike)."""
    return ["s = s + 1", f"if s == {stages}:", "    s = 0", "    ph = ph ^ 1"]


def _aux_ring_loads(program, lay):
    """aux_ring, producer thread, after a tile's last k-block: (the input maps to acquire, the
    lines). The tile's aux groups (backends/gpu/sm90.aux_ring_geometry) go into the next ring
    positions like k-blocks: wait until the slot is released, expect its full boxes' bytes,
    TMA-load each group's 64 x 64 panel of every input (zero-filled past M and N). So the
    inputs need no buffer of their own and land as the consumers finish the mainloop."""
    if not lay.aux_ring:
        return None
    ks, stage = lay.ring_inputs, sm90.stage_bytes(lay.bn)
    out = ["# aux_ring: this tile's (M, N) inputs, as the ring positions after its k-blocks"]
    for a in range(lay.aux_stages):
        gs = range(a * lay.aux_per_stage, min(lay.aux_groups, (a + 1) * lay.aux_per_stage))
        out += [f"mbar_wait(bars + 8 * ({lay.stages} + s), ph ^ 1, werr, {WAIT_EMPTY})",
                "fb = bars + 8 * s",
                f"mbar_expect_tx(fb, {len(gs) * len(ks) * sm90.PANEL_BYTES})",
                f"sa = sbase + s * {stage}"]
        for i, g in enumerate(gs):
            h, c = divmod(g, lay.panels)
            for x, k in enumerate(ks):
                dst = f"sa + {(i * len(ks) + x) * sm90.PANEL_BYTES}"
                x0, y0 = f"n0 + {sm90.PANEL * c}", f"m0 + {sm90.PANEL * h}"
                batched = program.batched and program.spans(program.inputs[k])[0]
                out.append(f"tma_load_3d({dst}, tmX{x}, {x0}, {y0}, l, fb)" if batched else
                           f"tma_load_2d({dst}, tmX{x}, {x0}, {y0}, fb)")
        out += _advance(lay.stages)
    return [f"tmX{x}" for x in range(len(ks))], out


def _aux_ring_wait(lay):
    """aux_ring, consumer, after the k-loop (s, ph: the tile's first aux position): wait for
    each aux stage in ring order, remembering the first slot (s_aux, which the epilogue's panel
    addresses start from), and step s, ph past them. Cooperative warpgroups wait on every ring
    position in order, so no wait can pass on a slot's older phase (mbarrier waits test parity
    only: a wait on position q is sound once q - stages has completed)."""
    if not lay.aux_ring:
        return []
    out = ["s_aux = s    # aux_ring: the tile's aux stages start at slot s"]
    for _ in range(lay.aux_stages):
        out.append(f"mbar_wait(bars + 8 * s, ph, werr, {WAIT_FULL})")
        out += _advance(lay.stages)
    return out


def _aux_ring_release(lay):
    """aux_ring, consumer, after the epilogue: its "every pair is staged" barrier ordered every
    read of the aux panels before this, so thread 0 releases the tile's aux slots."""
    if not lay.aux_ring:
        return []
    out = ["if tid == 0:    # aux_ring: the warpgroup's reads of the tile's aux panels are done"]
    for i in range(lay.aux_stages):
        out += [f"    asl = s_aux + {i}", f"    if asl >= {lay.stages}:", f"        asl = asl - {lay.stages}",
                f"    mbar_arrive(bars + 8 * ({lay.stages} + asl))"]
    return out


def _k_loop(layouts, frags, stages, bn, split=False):
    """The consumer's k-loop over one tile: layouts = (a_kmajor, b_kmajor); frags =
    [(accumulator tuple, byte offset of its 64 rows of A inside a stage: the same in both A
    layouts)], each one m64n{bn} wgmma per k16 step (the B descriptor is the same for both
    widths: a K-major B's rows are SBO apart, an N-major B's 64-column panels LBO apart). A
    slot is released one k-block late (wait_group 1 keeps one wgmma group in flight). The
    tile's first k16 step has scale_d 0 (kb == 0: the accumulators come in undefined); one
    fence and one wait serve every fragment, the others are only tied beside them (wg_tie).
    split: a split-K unit's k-blocks [kb0, kb1), scale_d 0 at kb0."""
    out = ["prev = -1", f"for kb in range({'kb0, kb1' if split else 'ktiles'}):"]
    out += ["    " + x for x in k_issue(layouts, frags, bn, "kb - kb0" if split else "kb") + k_retire(frags, stages)]
    return out + k_drain(frags, stages)


def _once(frags, op, ind, note=""):
    """op on the first fragment, the others only tied beside it (one fence or wait serves all)."""
    return [f"{ind}{acc} = {op if i == 0 else 'wg_tie'}({acc}){note if i == 0 else ''}"
            for i, (acc, _) in enumerate(frags)]


def k_issue(layouts, frags, bn, first="kb"):
    """k-block kb's wgmma group: wait for its slot s to fill, then one wgmma per fragment and
    k16 step, committed as one group (it runs while the lines after it execute). first: the
    first k16 step's scale_d, 0 on the tile's first k-block."""
    a_kmajor, b_kmajor = layouts
    stage = sm90.stage_bytes(bn)
    ka, la, sa_ = sm90.DESC_K_MAJOR if a_kmajor else sm90.DESC_N_MAJOR
    kb_, lb, sb_ = sm90.DESC_K_MAJOR if b_kmajor else sm90.DESC_N_MAJOR
    out = [f"mbar_wait(bars + 8 * s, ph, werr, {WAIT_FULL})   # TMA filled slot s",
           f"sa = sbase + s * {stage}",
           f"sb = sa + {sm90.a_stage_bytes()}"]
    out += _once(frags, "wg_fence", "")
    for k in range(sm90.K16_STEPS):
        out += [f"{acc} = wg_mma({acc}, wgmma_desc(sa + {a_off} + {ka * k}, {la}, {sa_}), "
                f"wgmma_desc(sb + {kb_ * k}, {lb}, {sb_}), {first if k == 0 else 1})" for acc, a_off in frags]
    return out + ["wg_commit()"]


def k_retire(frags, stages):
    """After k-block kb's issue: the previous k-block's group is done (wait_group 1), so its
    slot is released; s and ph step on."""
    out = _once(frags, "wg_wait1", "", "    # the previous k-block's wgmma is done: release its slot")
    out += ["if (prev >= 0) & (tid == 0):",
            f"    mbar_arrive(bars + 8 * ({stages} + prev))",
            "prev = s"]
    return out + _advance(stages)


def k_drain(frags, stages):
    """After a tile's last k-block: every group done, the last slot released."""
    return _once(frags, "wg_wait0", "") + ["if (prev >= 0) & (tid == 0):",
                                            f"    mbar_arrive(bars + 8 * ({stages} + prev))"]


def _consumer(program, layouts, deterministic, lay, epilogue, tile_loads, split=False):
    """Cooperative: both consumer warpgroups work on every tile, 64 rows each. tile_loads: the
    epilogue's loads issued at the tile's start (epilogue_fragment.vector_loads). split: over
    split-K's work units, the epilogue after the fix-up and only in the last split (splitk.py)."""
    out = ["# ---- consumer warpgroups: wgmma over the ring, then the fused epilogue ----",
           "setmaxnreg_consumer()",
           "wg = wgid - 1",
           "s = 0",
           "ph = 0"]
    out += splitk.unit_loop("") if split else ["tile = cuda.blockIdx.x", "while tile < tiles:"]
    out += tile_coords("    ", lay.bn)
    out.append("    acc = acc_undef()")
    out += ["    " + x for x in tile_loads + aux_copy_lines(program, lay)]
    out += ["    " + x for x in _k_loop(layouts, [("acc", f"wg * {sm90.A_HALF_BYTES}")], lay.stages, lay.bn, split)]
    out += ["    " + x for x in _aux_ring_wait(lay)]
    epi = epilogue(program, lay, ["acc"], deterministic)
    out += ["    " + x for x in (splitk.fixup(lay.bn // 2) + splitk.epilogue(epi) if split else epi)]
    out += ["    " + x for x in _aux_ring_release(lay)]
    out.append("    u = u + cuda.gridDim.x" if split else "    tile = tile + cuda.gridDim.x")
    return out


def _consumer_pingpong(program, layouts, deterministic, lay, epilogue, tile_loads):
    """Ping-pong (BN = 128 only): the CTA's tiles go alternately to WG1 and WG2, each holding a
    whole 128 x 128 tile as two m64n128 fragments. Named barriers 3 and 4 order the mainloops
    (WG1's tile i, then WG2's tile i + 1, ...), so one warpgroup has the tensor cores while the
    other runs its epilogue. The producer streams every tile through one ring in tile order, so a
    consumer's tile `it` (its index among the CTA's tiles) starts at ring position
    it * ktiles; its slot and phase come from that position, once per tile (any ring depth)."""
    stages = lay.stages
    out = ["# ---- consumer warpgroups: whole tiles in turn; mainloops ordered, epilogues overlapped ----",
           "setmaxnreg_consumer()",
           "wg = wgid - 1",
           "it = wg",
           "tile = cuda.blockIdx.x + wg * cuda.gridDim.x",
           "while tile < tiles:"]
    out += tile_coords("    ", lay.bn)
    out += ["    " + x for x in tile_loads]
    out += ["    acc0 = acc_undef()",
            "    acc1 = acc_undef()",
            "    if it > 0:",
            "        named_bar_sync(3 + wg, 256)    # the other warpgroup's previous mainloop is done",
            "    pos = it * ktiles    # the tile's first ring position (u32: it, ktiles < 2^16 in practice)",
            f"    lap = udiv32(pos, {stages})",
            f"    s = pos - lap * {stages}",
            "    ph = lap & 1"]
    out += ["    " + x for x in _k_loop(layouts, [("acc0", "0"), ("acc1", str(sm90.A_HALF_BYTES))], stages, lay.bn)]
    out += ["    if tile + cuda.gridDim.x < tiles:",
            "        named_bar_arrive(4 - wg, 256)    # the other warpgroup's next mainloop may start"]
    out += ["    " + x for x in epilogue(program, lay, ["acc0", "acc1"], deterministic)]
    out += ["    tile = tile + 2 * cuda.gridDim.x",
            "    it = it + 2"]
    return out
