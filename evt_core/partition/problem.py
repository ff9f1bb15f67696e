"""Decomposition of a graph into independent search problems (design doc 5.2).

Edges that can never be internal are cut (`rules.prune_edges`), the rest splits into weakly
connected components, and each component becomes a `Problem`: its nodes, the edges whose cut
costs bytes, and two constraint families that say everything the rules need:

* `forbid[i]`: nodes that may never share i's group. It holds pairs joined by a forbidden edge,
  pairs joined by a path through a node outside the component (convexity), both propagated to
  every ancestor/descendant pair whose paths they lie on; GEMM producers behind an absorbed
  permute; pairs of anchors; an anchor with each elementwise node that does not fit its
  output's frame (`rules.off_frame`), and with each node of a later stage (`rules.stage_conflict`).
* `order[v]`: nodes u with a path u ~> v that is an edge or runs outside the component; group(u)
  must precede group(v). This is the original's "one-hop neighbours as fixed singletons plus
  d->a edges", written as paths so that it needs no extra vertices.

A component's optimum assumes the rest of the graph is singletons, a relaxation of the global
problem; the driver verifies the assembled plan and merges components if that ever fails."""
from __future__ import annotations

from dataclasses import dataclass

from .graph import Graph
from .optable import Kind
from .rules import Reach, absorbed_layout_producers, stage_conflict, off_frame, prune_edges, stages
from .union_find import DisjointSets


def bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


@dataclass(frozen=True, slots=True)
class Problem:
    names: tuple[str, ...]                   # component nodes in topological order
    edges: tuple[tuple[int, int, int], ...]  # (u, v, bytes) edges that may be internal, u < v
    fixed_cost: int                          # bytes on component edges that are always cut
    forbid: tuple[int, ...]                  # forbid[i]: mask of nodes never in i's group
    order: tuple[tuple[int, ...], ...]       # order[v]: nodes whose group must precede v's
    anchors: tuple[int, ...] = ()            # anchor nodes (already pairwise forbidden)

    @property
    def size(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Decomposition:
    reach: Reach
    internal: frozenset                      # possibly-internal edges (global indices)
    components: tuple[tuple[int, ...], ...]  # global indices, each sorted
    stage: object                            # rules.stages(g)


def decompose(g: Graph) -> Decomposition:
    """Postcondition: every group of every legal plan lies inside one component."""
    r = Reach(g)
    keep = prune_edges(g, r)
    sets = DisjointSets(len(r.names))
    for u, v in keep:
        sets.union(u, v)
    return Decomposition(r, frozenset(keep), tuple(tuple(c) for c in sets.groups().values()), stages(g))


def make_problem(g: Graph, d: Decomposition, comp: tuple[int, ...]) -> Problem:
    r, cmask = d.reach, sum(1 << i for i in comp)
    local = {gi: li for li, gi in enumerate(comp)}
    users = {n: [r.names[v] for v in r.succs[i]] for n, i in r.index.items()}
    outside = _outside_paths(r, comp, cmask)
    bad: list[tuple[int, int]] = []            # pairs that poison every path they lie on
    for v in comp:
        bad += [(u, v) for u in r.preds[v] if cmask >> u & 1 and (u, v) not in d.internal]
    for u in comp:
        bad += [(u, v) for v in bits(outside[u])]
        for a, m in absorbed_layout_producers(g, r.names[u], users):
            if cmask >> r.index[a] & 1 and cmask >> r.index[m] & 1:
                bad.append((r.index[a], r.index[m]))
    forbid = {i: 0 for i in comp}
    for u, v in bad:                           # O(|bad| * |C|) mask updates
        above, below = r.anc[u] & cmask, r.desc[v] & cmask
        for a in bits(above):
            forbid[a] |= below
        for c in bits(below):
            forbid[c] |= above
    anchors = [i for i in comp if g.nodes[r.names[i]].kind is Kind.ANCHOR]
    amask = sum(1 << a for a in anchors)
    for a in anchors:
        forbid[a] |= amask & ~(1 << a)
        for c in comp:              # off_frame, stage_conflict: pair rules, no path propagation needed
            if off_frame(g, r.names[a], r.names[c]) or stage_conflict(d.stage, r.names[a], r.names[c]):
                forbid[a] |= 1 << c
                forbid[c] |= 1 << a
    edges, fixed = [], 0
    for v in comp:
        for u in r.preds[v]:
            if cmask >> u & 1:
                w = g.edge_bytes(r.names[u], r.names[v])
                if forbid[u] >> v & 1:
                    fixed += w
                else:
                    edges.append((local[u], local[v], w))
    order = [set() for _ in comp]
    for v in comp:
        order[local[v]].update(local[u] for u in r.preds[v] if cmask >> u & 1)
    for u in comp:
        for v in bits(outside[u]):
            order[local[v]].add(local[u])
    return Problem(tuple(r.names[i] for i in comp), tuple(edges), fixed,
                   tuple(_to_local(forbid[i], local) for i in comp),
                   tuple(tuple(sorted(o)) for o in order), tuple(local[a] for a in anchors))


def _outside_paths(r: Reach, comp, cmask: int) -> dict[int, int]:
    """outside[u]: component nodes reachable from u by a path of length >= 2 whose interior
    avoids the component. Only nodes between the component's ends can be on such a path."""
    lo, hi = 0, 0
    for i in comp:
        lo |= r.desc[i]
        hi |= r.anc[i]
    between = lo & hi & ~cmask
    hit: dict[int, int] = {}
    for x in sorted(bits(between), reverse=True):
        m = 0
        for y in r.succs[x]:
            m |= (1 << y) if cmask >> y & 1 else hit.get(y, 0)
        hit[x] = m
    return {u: _or(hit.get(y, 0) for y in r.succs[u] if not cmask >> y & 1) for u in comp}


def _or(masks) -> int:
    m = 0
    for x in masks:
        m |= x
    return m


def _to_local(mask: int, local: dict[int, int]) -> int:
    return sum(1 << local[i] for i in bits(mask) if i in local)
