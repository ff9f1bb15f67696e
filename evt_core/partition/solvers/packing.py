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


def pack_bound(n: int, undecided, grp, members, forbid, k: int, need: int | None = None) -> int:
    """undecided: (u, v, w) edges with v >= k (v unplaced, u placed iff u < k, grp[u] >= 0).
    Vertices are unplaced nodes v (id v) and placed groups s (id n + s). Stops early once the
    bound reaches `need` (the caller only asks "does it prune?")."""
    adj: dict[int, list] = {}
    cap = []
    for u, v, w in undecided:
        x = u if u >= k else n + grp[u]
        e = len(cap)
        cap.append(w)
        adj.setdefault(x, []).append((v, e))
        adj.setdefault(v, []).append((x, e))
    total, length = 0, 1
    active = {x: c for x in adj if (c := _conflicts(x, n, members, forbid)) != (0, 0)}
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
                path = _shortest(src, active[src], adj, cap, n)
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


def _conflicts(x: int, n: int, members, forbid) -> tuple[int, int]:
    """(node mask, group mask) of the vertices that conflict with vertex x."""
    if x < n:
        fm = forbid[x]
        return fm, sum(1 << s for s, m in enumerate(members) if m & fm)
    s = x - n
    fm = 0
    for i in bits(members[s]):
        fm |= forbid[i]
    return fm, ((1 << len(members)) - 1) & ~(1 << s)


def _shortest(src, conf, adj, cap, n):
    """Edge ids of a shortest positive-capacity path from src to a conflicting vertex, or
    None if none exists."""
    cm, gm = conf
    prev = {src: None}
    frontier = [src]
    while frontier:
        nxt = []
        for x in frontier:
            for y, e in adj[x]:
                if cap[e] > 0 and y not in prev:
                    prev[y] = (x, e)
                    if (cm >> y & 1) if y < n else (gm >> (y - n) & 1):
                        path = []
                        while prev[y] is not None:
                            y, e = prev[y]
                            path.append(e)
                        return path
                    nxt.append(y)
        frontier = nxt
    return None
