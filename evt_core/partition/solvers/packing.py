"""Path-packing lower bound (the dual of the multicut LP) for a partial assignment.

Two vertices *conflict* when they can never share a group: two distinct placed groups, a
placed group and a node forbidden with one of its members, or a forbidden pair of unplaced
nodes. Every path of undecided edges between conflicting vertices contains a cut edge. Flows
f_p on such paths with sum_{p containing e} f_p <= w_e give sum_p f_p <= cut weight of the
undecided edges (weak LP duality), so a greedy packing is a valid lower bound.

Edges already charged by another bound (`skip`) are left out, so the two bounds add up."""
from __future__ import annotations

from ..problem import bits


def pack_bound(n: int, undecided, grp, members, forbid, k: int) -> int:
    """undecided: (u, v, w) edges with v >= k (v unplaced); grp[u] >= 0 for placed u < k.
    Vertices: unplaced nodes v (ids v) and placed groups s (ids n + s)."""
    adj: dict[int, list] = {}
    cap = []
    for u, v, w in undecided:
        x = u if u >= k else n + grp[u]
        e = len(cap)
        cap.append(w)
        adj.setdefault(x, []).append((v, e))
        adj.setdefault(v, []).append((x, e))
    if not cap:
        return 0
    fmask = {}                         # vertex -> mask of nodes it conflicts with
    for x in adj:
        if x >= n:
            m = 0
            for i in bits(members[x - n]):
                m |= forbid[i]
            fmask[x] = m
        else:
            fmask[x] = forbid[x]

    def conflict(x, y):
        if x >= n and y >= n:
            return True
        if x >= n:
            x, y = y, x
        if y >= n:
            return bool(forbid[x] & members[y - n])
        return bool(forbid[x] >> y & 1)

    total = 0
    for src in sorted(adj, key=lambda x: -len(adj[x])):
        while True:
            prev = {src: None}
            frontier, hit = [src], None
            while frontier and hit is None:
                nxt = []
                for x in frontier:
                    for y, e in adj[x]:
                        if cap[e] > 0 and y not in prev:
                            prev[y] = (x, e)
                            if conflict(src, y):
                                hit = y
                                break
                            nxt.append(y)
                    if hit is not None:
                        break
                frontier = nxt
            if hit is None:
                break
            path, y = [], hit
            while prev[y] is not None:
                x, e = prev[y]
                path.append(e)
                y = x
            f = min(cap[e] for e in path)
            for e in path:
                cap[e] -= f
            total += f
    return total
