"""The overlapped cooperative schedule (sm90_schedule="overlap"): both consumer warpgroups share
every 128 x 128 tile, 64 rows each, as in the cooperative schedule, but hold two accumulator
sets, so a tile's epilogue runs while the tensor cores work on the CTA's next tile.

Why: in the cooperative schedule the tensor cores idle through every epilogue (W2's and BERT's
GELU backward's take 1.6-2.8 us of issue time a tile, against 3.4-4.5 us of mainloop at
K = 768-1024), and ping-pong, which overlaps them, gives each warpgroup a whole tile's epilogue
and 128 accumulators (measured slower on those trees, bench/RESULTS.md runs 84-85).

Per tile t (accumulators in `acc`), with t' = t + gridDim.x the CTA's next tile (`accn`):

    for c in 0 .. E-1:       issue k-block c of t' (if any)   -- wgmma runs asynchronously
                             piece c of t's epilogue          -- epilogue_fragment.fragment_chunks
                             retire k-block c - 1 (wait_group 1, release its slot)
    release t's aux slots;   t''s remaining k-blocks;   wait for t''s aux stages;   acc = accn

Invariant (no deadlock with (M, N) inputs through the ring): t's aux stages sit in the ring just
before t''s k-blocks, and until they are released the producer can fill only the first S - a of
those k-blocks (S ring slots, a aux stages); piece c waits on k-block c. So either the first
piece reads every input word the thread needs into registers and releases the aux stages
before its first column group (up to two 16-bit inputs: 32 registers a thread each, built
without spills; preloaded()), or they are released after the last piece and E <= S - a
(pieces()). The arithmetic is backends/gpu/overlap.py's, which the cupy backend's overlapped
kernel shares.
"""
from ...gpu import overlap, sm90
from ...gpu.overlap import PIECES, PRELOAD_WORDS  # noqa: F401 - the shared numbers, named here for the tests
from . import epilogue_fragment
from .mainloop_sm90 import _aux_ring_release, _aux_ring_wait, k_drain, k_issue, k_retire, tile_coords


def preloaded(lay):
    """Whether a tile's ring inputs are read whole by the first piece (and their slots released):
    backends/gpu/overlap.preloaded of this layout."""
    return overlap.preloaded(len(lay.ring_inputs), lay.bn)


def pieces(lay):
    """How many k-blocks of the next tile a tile's epilogue is spread over (the invariant above):
    backends/gpu/overlap.pieces of this layout."""
    return overlap.pieces(len(lay.ring_inputs), lay.bn, lay.stages, lay.aux_stages)


def device_functions(layouts, lay):
    """kb_issue and kb_retire, one k-block's wgmma group and its retirement as module-level
    device functions: the kernel issues k-blocks at 2 + pieces() sites, and numba types a
    function's body once where it would type each inlined copy (about 0.25 s a copy on a
    2-core CPU); LLVM inlines them (forceinline), so the code is the same."""
    acc = [("acc", f"wg * {sm90.A_HALF_BYTES}")]
    issue = k_issue(layouts, acc, lay.bn) + ["return acc"]
    retire = k_retire(acc, lay.stages) + ["return acc, s, ph, prev"]
    return "\n\n".join(
        "@cuda.jit(device=True, forceinline=True)\n" + f"def {name}({params}):\n" + "\n".join("    " + x for x in body) + "\n"
        for name, params, body in (("kb_issue", "acc, sbase, bars, s, ph, werr, wg, kb", issue),
                                   ("kb_retire", "acc, bars, s, ph, prev, tid", retire)))


_ISSUE = "{0} = kb_issue({0}, sbase, bars, s, ph, werr, wg, kb)"
_RETIRE = "{0}, s, ph, prev = kb_retire({0}, bars, s, ph, prev, tid)"


def consumer_overlap(program, layouts, deterministic, lay):
    """The consumer warpgroups' lines (after setmaxnreg, inside `else:` of the warp split)."""
    stages, bn = lay.stages, lay.bn
    cur, nxt = [("acc", "")], [("accn", "")]
    n = pieces(lay)
    early = preloaded(lay)
    release = _aux_ring_release(lay)
    chunks = epilogue_fragment.fragment_chunks(program, lay, ["acc"], deterministic, n, release if early else None)
    vecs = list(lay.vecs)
    out = [f"# ---- consumer warpgroups: cooperative, two accumulator sets; a tile's epilogue in {n} pieces ----",
           "setmaxnreg_consumer()",
           "wg = wgid - 1",
           "s = 0",
           "ph = 0",
           "prev = -1",
           "s_aux = 0",
           "tile = cuda.blockIdx.x",
           "acc = acc_undef()"]
    out += tile_coords("", bn)
    out += epilogue_fragment.vector_loads(program, lay, guard="tile < tiles")
    out += ["if tile < tiles:    # the CTA's first tile: its mainloop alone",
            "    for kb in range(ktiles):",
            "        " + _ISSUE.format("acc"),
            "        " + _RETIRE.format("acc")]
    out += ["    " + x for x in k_drain(cur, stages) + _aux_ring_wait(lay)]
    out += ["while tile < tiles:",
            "    ntile = tile + cuda.gridDim.x",
            "    more = ntile < tiles",
            "    accn = acc_undef()",
            "    prev = -1",
            "    kb = 0"]
    out += tile_coords("    ", bn)
    for c, piece in enumerate(chunks):
        out += [f"    go = more & (kb < ktiles)    # piece {c}: k-block kb of the next tile runs beside it",
                "    if go:"]
        out += ["        " + _ISSUE.format("accn")]
        out += ["    " + x for x in piece]
        out += ["    if go:", "        " + _RETIRE.format("accn"), "        kb = kb + 1"]
        if c == 0 and vecs:
            # the tile's column vectors went to shared memory in piece 0: load the next tile's
            out += ["    " + x for x in tile_coords("", bn, "ntile", "_n")]
            out += ["    " + x for x in epilogue_fragment.vector_loads(program, lay, "l_n", "n0_n", "bvn", "more")]
    out += [] if early else ["    " + x for x in release]
    out += ["    if more:",
            "        while kb < ktiles:"]
    out += ["            " + _ISSUE.format("accn"), "            " + _RETIRE.format("accn"), "            kb = kb + 1"]
    # the drain on every path (a no-op where nothing was issued): ptxas cannot tell that `more`
    # is uniform, and a wait it inserts itself in a branch serialises every wgmma (C7518)
    out += ["    " + x for x in k_drain(nxt, stages)]
    wait = _aux_ring_wait(lay)
    out += (["    if more:"] + ["        " + x for x in wait]) if wait else []
    out += ["    acc = accn"]
    out += [f"    bv{k}{sfx} = bvn{k}{sfx}" for k in vecs for sfx, _ in epilogue_fragment.thread_columns(lay)]
    out += ["    tile = ntile"]
    return out

