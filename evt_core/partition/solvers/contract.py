"""A window of a plan as a Problem of its own: the nodes of a window W (whole incumbent
groups) stay free, every other incumbent group is contracted to one item. The exact search
(`bnb._Search`, with its memo and full bound) then re-solves the window, where the window
search of `lns` only had a weak bound of its own.

Why the contraction is exact for the plans that keep each outside group whole:

* forbid: two items may share a group iff no member pair is forbidden (forbid is pairwise);
  outside groups are also forbidden with each other, so they stay as they were;
* order: item a must precede-or-equal item b iff some member of a is in order[] of a member of
  b (acyclicity of the quotient reads only these relations, which contraction preserves);
* cost: an original edge is cut iff its items end in different groups; edges inside an outside
  group are internal, those between two outside groups always cut (fixed).

The items are numbered in a topological order of the contracted relation. It is acyclic: the
incumbent is legal, so its quotient is a DAG, and an item cycle would map onto a quotient
cycle (outside groups are incumbent groups; a cycle only through window nodes of one group is
a cycle of the original DAG)."""
from __future__ import annotations

import heapq

from ..problem import Problem, bits


def contract(p: Problem, groups, win: int) -> tuple[Problem, list[tuple[int, ...]], list]:
    """(sub-problem, items, incumbent): items[i] holds the original nodes of item i; the
    incumbent is `groups` (legal groups of p, W a union of some of them) in item indices.
    Invariant: a plan of the sub-problem costs what its expansion costs in p."""
    units = [(v,) for v in range(p.size) if win >> v & 1]
    outside = [tuple(g) for g in groups if not win >> g[0] & 1]
    items = _topological(p, units + outside)
    where = [0] * p.size
    for i, it in enumerate(items):
        for v in it:
            where[v] = i
    n = len(items)
    fixed_out = 0
    for i, it in enumerate(items):
        if len(it) > 1 or not win >> it[0] & 1:
            fixed_out |= 1 << i
    forbid = [0] * n
    for i, it in enumerate(items):
        for v in it:
            for x in bits(p.forbid[v]):
                forbid[i] |= 1 << where[x]
        if fixed_out >> i & 1:
            forbid[i] |= fixed_out & ~(1 << i)
    order = [set() for _ in items]
    for v in range(p.size):
        for u in p.order[v]:
            if where[u] != where[v]:
                order[where[v]].add(where[u])
    weight: dict[tuple[int, int], int] = {}
    fixed = p.fixed_cost
    for u, v, w in p.edges:
        a, b = where[u], where[v]
        if a == b:
            continue
        if forbid[a] >> b & 1:
            fixed += w
        else:
            weight[(a, b)] = weight.get((a, b), 0) + w
    edges = tuple((a, b, w) for (a, b), w in sorted(weight.items()))
    sub = Problem(tuple(str(i) for i in range(n)), edges, fixed, tuple(forbid),
                  tuple(tuple(sorted(o)) for o in order))
    inc = [tuple(sorted({where[v] for v in g})) for g in groups]
    return sub, items, inc


def expand(items, sub_groups) -> list[tuple[int, ...]]:
    """The plan of p that a plan of the sub-problem stands for."""
    return [tuple(sorted(v for i in g for v in items[i])) for g in sub_groups]


def _topological(p: Problem, items: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """`items` sorted so that every order relation (p.order, which holds every edge's tail)
    runs from a lower to a higher index; ties by smallest member (deterministic)."""
    where = {v: i for i, it in enumerate(items) for v in it}
    succ = [set() for _ in items]
    indeg = [0] * len(items)
    for v in range(p.size):
        for u in p.order[v]:
            a, b = where[u], where[v]
            if a != b and b not in succ[a]:
                succ[a].add(b)
                indeg[b] += 1
    ready = [(min(items[i]), i) for i in range(len(items)) if indeg[i] == 0]
    heapq.heapify(ready)
    out = []
    while ready:
        _, i = heapq.heappop(ready)
        out.append(items[i])
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, (min(items[j]), j))
    assert len(out) == len(items), "contracted relation has a cycle: the plan was not legal"
    return out
