"""The legality rules of a plan, checked on the whole graph, independently of how the solver
encodes them. `violations` lists every broken rule; `check_plan` raises on the first.

0. Groups cover every compute node once (inputs and constants belong to no group); an opaque
   node is a group of its own.
1. At most one anchor per group.
2. Epilogue-only: no edge inside a group into its anchor, except a permute/transpose feeding a
   GEMM, which becomes an operand layout and so may have no producer inside the group.
3. A reduction's result is used only outside its group.
4. The groups form an acyclic graph.
5. Each group is weakly connected.
6. No node of a group is of a later stage than its anchor (rules.stage_conflict)."""
from __future__ import annotations

from typing import Iterator, Sequence

from .errors import PartitionError
from .graph import Graph
from .optable import GEMMS, LAYOUT_INTO_GEMM, Kind
from .rules import stage_conflict, off_frame, stages

Violation = tuple[str, str, tuple[str, ...]]


def violations(g: Graph, groups: Sequence[Sequence[str]]) -> Iterator[Violation]:
    where: dict[str, int] = {}
    for k, grp in enumerate(groups):
        for n in grp:
            if n not in g.nodes or g.nodes[n].kind in (Kind.INPUT, Kind.CONST):
                yield "coverage", "not a compute node of the graph; only compute nodes are grouped", (n,)
            elif n in where:
                yield "coverage", "node appears in two groups", (n,)
            where[n] = k
    missing = [n for n in g.compute_nodes() if n not in where]
    if missing:
        yield "coverage", "compute nodes in no group", tuple(missing)
    stage = stages(g)
    for grp in groups:
        yield from _group_violations(g, list(grp), where, stage)
    cycle = _quotient_cycle(g, groups, where)
    if cycle:
        yield "acyclic", "groups form a cycle; a kernel would need a result of a later kernel", cycle


def _group_violations(g: Graph, grp: list[str], where, stage) -> Iterator[Violation]:
    nodes = [g.nodes[n] for n in grp if n in g.nodes]
    inside = set(grp)
    if len(grp) > 1:
        opaque = [n.name for n in nodes if n.kind is Kind.OPAQUE]
        if opaque:
            yield "opaque", "an opaque op cannot fuse; give it a group of its own", tuple(opaque)
    anchors = [n.name for n in nodes if n.kind is Kind.ANCHOR]
    if len(anchors) > 1:
        yield "one-anchor", "a group has at most one anchor (mainloop); split it", tuple(anchors)
    for a in anchors:
        misfits = [n.name for n in nodes if off_frame(g, a, n.name)]
        if misfits:
            yield "frame", "an elementwise node in a GEMM's group must have the GEMM output's element count " \
                           "or broadcast onto it; move it to another group", (a, *misfits)
        late = [n.name for n in nodes if stage_conflict(stage, a, n.name)]
        if late:
            yield "stage", "a node of a later stage than the anchor's (a backward op reading the output " \
                           "gradients, in a forward GEMM's group) cannot run in its kernel; move it to " \
                           "another group", (a, *late)
    for n in nodes:
        for u in dict.fromkeys(n.inputs):
            if u not in inside:
                continue
            prod = g.nodes[u]
            if prod.kind is Kind.REDUCTION:
                yield "reduction-leaf", "a reduction's result is complete only after its group; " \
                                        "move the user to another group", (u, n.name)
            if n.kind is Kind.ANCHOR:
                if not (prod.op in LAYOUT_INTO_GEMM and n.op in GEMMS):
                    yield "epilogue-only", "an edge inside a group into its anchor would fuse a " \
                                           "prologue; cut it", (u, n.name)
                else:
                    inner = [x for x in prod.inputs if x in inside]
                    if inner:
                        yield "epilogue-only", "a permute absorbed into a GEMM operand may not " \
                                               "have producers in the GEMM's group", (*inner, u, n.name)
    if not _connected(g, grp, inside):
        yield "connected", "a group must be weakly connected; split it into its pieces", tuple(grp)


def _connected(g: Graph, grp: list[str], inside: set[str]) -> bool:
    if len(grp) <= 1:
        return True
    adj = {n: set() for n in grp}
    for n in grp:
        for u in g.nodes[n].inputs:
            if u in inside and u != n:
                adj[n].add(u)
                adj[u].add(n)
    seen, todo = {grp[0]}, [grp[0]]
    while todo:
        for m in adj[todo.pop()] - seen:
            seen.add(m)
            todo.append(m)
    return len(seen) == len(grp)


def _quotient_cycle(g: Graph, groups, where) -> tuple[str, ...]:
    """Names of nodes in groups on a cycle of the quotient graph, or () when acyclic."""
    succ = [set() for _ in groups]
    for n, k in where.items():
        for u in g.nodes[n].inputs:
            if u in where and where[u] != k:
                succ[where[u]].add(k)
    indeg = [0] * len(groups)
    for s in succ:
        for t in s:
            indeg[t] += 1
    ready = [k for k, d in enumerate(indeg) if d == 0]
    done = 0
    while ready:
        k = ready.pop()
        done += 1
        for t in succ[k]:
            indeg[t] -= 1
            if indeg[t] == 0:
                ready.append(t)
    if done == len(groups):
        return ()
    return tuple(n for k, d in enumerate(indeg) if d > 0 for n in groups[k])


def check_plan(g: Graph, groups) -> None:
    """Raise PartitionError for the first broken rule."""
    for rule, msg, nodes in violations(g, groups):
        raise PartitionError(rule, msg, nodes)


def is_legal(g: Graph, groups) -> bool:
    return next(violations(g, groups), None) is None


def groups_on_cycles(succ: Sequence[set[int]]) -> set[int]:
    """Indices of the groups that lie on a cycle of a quotient graph given by its successor
    sets (succ[k]: the groups that read group k), i.e. that reach themselves; empty iff the
    quotient is acyclic."""
    out = set()
    for k in range(len(succ)):
        seen, todo = set(), list(succ[k])
        while todo and k not in seen:
            x = todo.pop()
            if x not in seen:
                seen.add(x)
                todo.extend(succ[x])
        if k in seen:
            out.add(k)
    return out
