"""Path-packing lower bound (the dual of the multicut LP) for a partial assignment.

Two vertices *conflict* when they can never share a group: two distinct placed groups, a
placed group and a node forbidden with one of its members, or a forbidden pair of unplaced
nodes. Every path of undecided edges between conflicting vertices contains a cut edge. Flows
f_p on such paths with sum_{p containing e} f_p <= w_e give sum_p f_p <= cut weight of the
undecided edges (weak LP duality), so any packing is a valid lower bound. Short paths are
packed first (a path of length L uses L edges' capacity for one unit of bound), which roughly
doubles the bound over an arbitrary order on the benchmark's random graphs.

Edges already charged by another bound are simply not passed in, so the two bounds add up."""
from __future__ import annotations

from ..problem import bits


def pack_bound(n: int, undecided, grp, members, forbid, k: int, need: int | None = None,
               blocked=None) -> int:
    """undecided: (u, v, w) edges with v >= k (v unplaced, u placed iff u < k, grp[u] >= 0).
    Vertices are unplaced nodes v (id v) and placed groups s (id n + s). Stops early once the
    bound reaches `need` (the caller only asks "does it prune?"). blocked[x]: placed groups
    unplaced x can never join (acyclicity, `precede.blocked_groups`); more conflicts."""
    adj: dict[int, list] = {}
    cap, ends = [], []                           # ends[e]: xor of edge e's two vertex ids
    for u, v, w in undecided:
        x = u if u >= k else n + grp[u]
        e = len(cap)
        cap.append(w)
        ends.append(x ^ v)
        adj.setdefault(x, []).append((v, e))
        adj.setdefault(v, []).append((x, e))
    total, length = 0, 1
    active = _conflicts(n, adj, members, forbid, blocked, k)
    # due[src]: a lower bound on the length of src's next path. Capacities only decrease, so
    # shortest-path lengths never shrink: a source whose last search found only a path of
    # length d > `length` is skipped until length reaches d. Same paths, same order, same
    # bound as searching every source at every length, with far fewer searches.
    due = dict.fromkeys(active, 1)
    while active:
        for src in list(active):
            if due[src] > length:
                continue
            while True:
                path = _shortest(src, active[src], adj, cap, ends)
                if path is None:             # nothing conflicting reachable: never again
                    del active[src]
                    break
                if len(path) > length:       # only longer paths: wait for their round
                    due[src] = len(path)
                    break
                f = min(cap[e] for e in path)
                for e in path:
                    cap[e] -= f
                total += f
                if need is not None and total >= need:
                    return total
        length = max(length + 1, min((due[x] for x in active), default=length + 1))
    return total


def _conflicts(n: int, adj, members, forbid, blocked, k: int) -> dict[int, int]:
    """{x: mask of the vertices that conflict with x} for the vertices x of `adj` with any,
    in one id space (node v: bit v, group s: bit n + s). Symmetric by construction: forbid
    is symmetric, and x conflicts with group s iff some member of s forbids x or x is
    blocked from s (both sides get the same bits)."""
    full = ((1 << len(members)) - 1) << n
    unplaced = 0
    for x in adj:
        if x < n:
            unplaced |= 1 << x
    conf = {x: forbid[x] & unplaced for x in adj if x < n}
    gblock = [0] * len(members)                  # gblock[s]: unplaced nodes blocked from s
    if blocked is not None:
        for x in bits(unplaced):
            for s in bits(blocked[x]):
                gblock[s] |= 1 << x
    for s, m in enumerate(members):
        fm = 0
        for i in bits(m):
            fm |= forbid[i]
        fm = (fm & unplaced) | gblock[s]
        gbit = 1 << (n + s)
        for x in bits(fm):
            conf[x] |= gbit
        if n + s in adj:
            conf[n + s] = fm | (full & ~gbit)
    return {x: c for x in adj if (c := conf.get(x, 0))}   # adj order: sources' order


def _shortest(src, conf, adj, cap, ends):
    """Edge ids of a shortest positive-capacity path from src to a vertex of mask `conf`, or
    None if none exists. prev[y] is the edge y was reached by (-1 for src)."""
    prev = {src: -1}
    frontier = [src]
    while frontier:
        nxt = []
        for x in frontier:
            for y, e in adj[x]:
                if y not in prev and cap[e]:
                    prev[y] = e
                    if conf >> y & 1:
                        path = []
                        while (e := prev[y]) >= 0:
                            path.append(e)
                            y ^= ends[e]
                        return path
                    nxt.append(y)
        frontier = nxt
    return None
