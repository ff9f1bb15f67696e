"""The fragment epilogue's TMA stores (epilogue_fragment.py): its outputs' 128B-swizzled 64 x 64
panels, written by the consumer warpgroups in shared memory (FragLayout.outs), handed to the
TMA by one thread per warpgroup. Invariant: a panel is stored only after a proxy fence and a
barrier over every thread that wrote it, and a staging buffer is rewritten only after the bulk
group that reads it has (bulk_wait_read0 before the barrier that releases the writers)."""
from ...gpu import sm90

PANEL_BYTES = sm90.PANEL_BYTES


def _issue(program, panels):
    """Thread 0's store calls: per output k, one per (shared address, column, row) in
    panels(k); an output without L (batched program) is stored by the first batch only."""
    out = []
    for k, t in enumerate(program.outputs):
        sl = program.spans(t)[0]
        ind = "    "
        if program.batched and not sl:
            out.append("    if l == 0:    # an output without L is the first batch's")
            ind = "        "
        for src, x, y in panels(k):
            out.append(ind + (f"tma_store_3d(tmO{k}, {src}, {x}, {y}, l)" if sl else
                              f"tma_store_2d(tmO{k}, {src}, {x}, {y})"))
    return out


def panel_store(program, lay, c):
    """Panel c of a recycling cooperative warpgroup (FragLayout.recycles), just written to its
    buffer c % 2: thread 0 waits until every earlier store has read its staging (panel c - 1's,
    so the buffer panel c + 1 will overwrite is free; issued a panel's math ago, it is done),
    the barrier publishes that and panel c's writes, and thread 0 stores panel c of every output
    as one bulk group. One barrier per panel; the tile start's bulk_wait_read0 and barrier cover
    panel 0."""
    def panels(k):
        yield f"sbase + {lay.outs[k] + (c % 2) * PANEL_BYTES} + wg * {lay.out_panels * PANEL_BYTES}", \
            f"n0 + {64 * c}", "m0w"
    return (["fence_proxy_async()", "if tid == 0:", "    bulk_wait_read0()   # panel c - 1 has left buffer (c + 1) % 2",
             f"named_bar_sync(1 + wg, 128)   # panel {c} is staged", "if tid == 0:"]
            + _issue(program, panels) + ["    bulk_commit()"])


def tile_stores(program, lay):
    """The whole staged tile to the TMA: fence (generic -> async proxy), barrier, one thread
    issues a store per panel and commits them as one bulk group; ping-pong then waits for the
    staging to be read and lets the other warpgroup write it."""
    pp = lay.pingpong

    def panels(k):
        for h in (range(2) if pp else [None]):
            for c in range(lay.panels):
                if pp:
                    yield f"sbase + {lay.outs[k] + (h * lay.panels + c) * PANEL_BYTES}", f"n0 + {64 * c}", f"m0 + {64 * h}"
                else:
                    yield f"sbase + {lay.outs[k] + c * PANEL_BYTES} + wg * {lay.panels * PANEL_BYTES}", \
                        f"n0 + {64 * c}", "m0w"
    out = ["fence_proxy_async()", "named_bar_sync(1 + wg, 128)   # every pair of the tile is staged", "if tid == 0:"]
    out += _issue(program, panels) + ["    bulk_commit()"]
    if pp:
        out += ["    bulk_wait_read0()   # the staging is read: the other warpgroup may write it",
                "if tile + cuda.gridDim.x < tiles:",
                "    named_bar_arrive(6 - wg, 256)"]
    return out
