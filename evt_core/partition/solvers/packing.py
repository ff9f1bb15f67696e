"""Path-packing lower bound (the dual of the multicut LP) for a partial assignment.

Two vertices *conflict* when they can never share a group: two distinct placed groups, a
placed group and a node forbidden with one of its members, or a forbidden pair of unplaced
nodes. Every path of undecided edges between conflicting vertices contains a cut edge. Flows
f_p on such paths with sum_{p containing e} f_p <= w_e give sum_p f_p <= cut weight of the
undecided edges (weak LP duality), so any packing is a valid lower bound. Short paths are
packed first (a path of length L uses L edges' capacity for one unit of bound), which roughly
doubles the bound over an arbitrary order on the benchmark's random graphs.

Edges already charged by another bound are simply not passed in, so the two bounds add up.

Paths alone stop at the LP value, which is often a whole edge below the integer optimum: three
pairwise-conflicting vertices around a hub need two cuts, the LP pays 3/2. So packed paths are
then grown into trees (`_grow`): a connected subgraph holding k pairwise-conflicting terminals
needs k - 1 cut edges (removing c edges leaves at most c + 1 pieces), and a flow f on it
still uses each of its edges' capacity once, so attaching a new terminal by a residual path Q
adds f to the bound for f of Q's capacity, where Q need not join two conflicting vertices."""
from __future__ import annotations

from ..problem import bits
from .spiders import second_cuts


def pack_bound(n: int, undecided, grp, members, forbid, k: int, need: int | None = None,
               blocked=None, gforbid: dict | None = None, spiders: bool = False) -> int:
    """undecided: (u, v, w) edges with v >= k (v unplaced, u placed iff u < k, grp[u] >= 0).
    Vertices are unplaced nodes v (id v) and placed groups s (id n + s). Stops early once the
    bound reaches `need` (the caller only asks "does it prune?"). blocked[x]: placed groups
    unplaced x can never join (acyclicity, `precede.blocked_groups`); more conflicts.
    gforbid: a cache {members mask: OR of its members' forbid masks} for this `forbid`
    (one problem per cache), kept by the caller across calls. spiders: also try second cuts
    on the packed paths (`spiders.py`); with a `need`, only when one more edge's bytes would
    reach it (on the merged random n=250 seed=1 problem they found more in 3 of ~9000 calls)."""
    adj: dict[int, list] = {}
    cap, ends = [], []                           # ends[e]: xor of edge e's two vertex ids
    for u, v, w in undecided:
        x = u if u >= k else n + grp[u]
        e = len(cap)
        cap.append(w)
        ends.append(x ^ v)
        adj.setdefault(x, []).append((v, e))
        adj.setdefault(v, []).append((x, e))
    conf = _conflicts(n, adj, members, forbid, blocked, k, gforbid)
    return pack_paths(adj, cap, ends, conf, need, spiders)


def pack_paths(adj, cap, ends, conf, need: int | None = None, spiders: bool = False) -> int:
    """The packing itself (module docstring) over any vertex ids: adj[x] = [(y, edge id)],
    cap[e] the capacities (consumed in place), ends[e] = x ^ y, conf[x] the mask of the
    vertices that may never share x's group, symmetric, for the vertices of adj with any
    (in adj order: the sources' order). `need` and `spiders` as in `pack_bound`."""
    total, length = 0, 1
    active = dict(conf)
    # due[src]: a lower bound on the length of src's next path. Capacities only decrease, so
    # shortest-path lengths never shrink: a source whose last search found only a path of
    # length d > `length` is skipped until length reaches d, and that path (`held`) is still
    # a shortest one then if all its edges kept capacity. Same bound as searching every
    # source at every length, with far fewer searches.
    due = dict.fromkeys(active, 1)
    held: dict[int, list] = {}
    # dead[x]: the vertex set of a residual component a failed search explored, x in it. It
    # only shrinks, so a source with no conflict in it never finds a path (43% of the
    # searches on random n=200 seed=0 were such failures).
    dead: dict[int, int] = {}
    trees = []                                    # (terminals, vertex set, flow) per packed path
    while active:
        for src in list(active):
            if due[src] > length:
                continue
            while True:
                path = held.pop(src, None)
                if path is None or not all(cap[e] for e in path):
                    if not active[src] & dead.get(src, -1):
                        del active[src]
                        break
                    path, seen = _attach((src,), active[src], adj, cap, ends)
                if path is None:             # nothing conflicting reachable: never again
                    region = sum(1 << x for x in seen)
                    for x in seen:
                        dead[x] = region
                    del active[src]
                    break
                if len(path) > length:       # only longer paths: wait for their round
                    due[src] = len(path)
                    held[src] = path
                    break
                f = min(cap[e] for e in path)
                verts = {src}
                y = src
                for e in reversed(path):
                    cap[e] -= f
                    y ^= ends[e]
                    verts.add(y)
                trees.append(([src, y], verts, f, (path, src)))
                total += f
                if need is not None and total >= need:
                    return total
        length = max(length + 1, min((due[x] for x in active), default=length + 1))
    plain: list = []
    total += _grow(trees, conf, adj, cap, ends, None if need is None else need - total, plain)
    if not spiders or need is not None and (total >= need or need - total > max(cap, default=0)):
        return total
    return total + second_cuts(plain, conf, adj, cap, ends, None if need is None else need - total)


def _grow(trees, conf, adj, cap, ends, need, plain) -> int:
    """Extra bound from attaching terminals to packed paths (module docstring). A tree with
    terminals K and flow f takes a residual path from its vertex set to a vertex y that
    conflicts with every terminal; f' = min(f, capacity of the path) of the tree gains y (one
    more cut needed), the other f - f' stays as it was and may grow on its own. Packed paths
    left as they were go to `plain` as (edge ids, start vertex, flow), for `second_cuts`."""
    gained = 0
    while trees:
        terms, verts, f, route = trees.pop()
        common = -1
        for t in terms:
            common &= conf.get(t, 0)
        path = None
        if common:
            path, y = _attach(verts, common, adj, cap, ends)
        if path is None:
            if route is not None:
                plain.append((route[0], route[1], f))
            continue
        g = min(f, min(cap[e] for e in path))
        x = y
        grown = set(verts)
        for e in path:
            cap[e] -= g
            grown.add(x)
            x ^= ends[e]
        gained += g
        if need is not None and gained >= need:
            return gained
        trees.append((terms + [y], grown, g, None))
        if f > g:
            trees.append((terms, verts, f - g, route))
    return gained


def _attach(verts, target, adj, cap, ends):
    """A shortest positive-capacity path from the vertex set `verts` to a vertex of mask
    `target` outside it: (edge ids from the far end back, that end), or (None, the vertices
    reachable from `verts`, which then form whole residual components)."""
    prev = dict.fromkeys(verts, -1)
    queue = list(verts)
    for x in queue:                              # appending while iterating: breadth-first,
        for y, e in adj[x]:                      # in the order of a layer-by-layer search
            if cap[e] and y not in prev:
                prev[y] = e
                if target >> y & 1:
                    path, z = [], y
                    while (e2 := prev[z]) >= 0:
                        path.append(e2)
                        z ^= ends[e2]
                    return path, y
                queue.append(y)
    return None, prev


GFORBID_MAX = 1 << 18                            # cache entries before it is cleared


def _conflicts(n: int, adj, members, forbid, blocked, k: int, gforbid=None) -> dict[int, int]:
    """{x: mask of the vertices that conflict with x} for the vertices x of `adj` with any,
    in one id space (node v: bit v, group s: bit n + s). Symmetric by construction: forbid
    is symmetric, and x conflicts with group s iff some member of s forbids x or x is
    blocked from s (both sides get the same bits). Only vertices of `adj` are named: no
    path reaches another, and skipping the groups without undecided edges saved a quarter of
    the bound's time on the merged n=250 seed=1 problem."""
    xs = [x for x in adj if x < n]               # unplaced vertices, adj order
    gs = [x - n for x in adj if x >= n]          # groups with a vertex in adj
    unplaced = present = 0
    for x in xs:
        unplaced |= 1 << x
    for s in gs:
        present |= 1 << s
    full = present << n
    conf = {x: forbid[x] & unplaced for x in xs}
    gblock = [0] * len(members)                  # gblock[s]: unplaced nodes blocked from s
    if blocked is not None:
        for x in xs:
            b = blocked[x] & present
            while b:                             # bit loops inlined: this runs per bound
                low = b & -b
                gblock[low.bit_length() - 1] |= 1 << x
                b ^= low
    if gforbid is None:
        gforbid = {}
    elif len(gforbid) > GFORBID_MAX:
        gforbid.clear()
    for s in gs:
        ms = members[s]
        fm = gforbid.get(ms)
        if fm is None:                           # the same groups recur across calls: caching
            fm = 0                               # saved ~2 % of a proof (merged n=250 seed=1)
            for i in bits(ms):
                fm |= forbid[i]
            gforbid[ms] = fm
        fm = (fm & unplaced) | gblock[s]
        gbit = 1 << (n + s)
        m = fm
        while m:
            low = m & -m
            conf[low.bit_length() - 1] |= gbit
            m ^= low
        conf[n + s] = fm | (full & ~gbit)
    return {x: c for x in adj if (c := conf.get(x, 0))}   # adj order: sources' order
