"""Local search on a legal plan: the incumbent branch-and-bound starts from.

Moves, each taken only if it strictly lowers the cost and the result is legal: merge the two
groups at the ends of a cut edge, or move one node into the group of a neighbour. The cost
change of a move is computed from the edges it touches; legality (forbidden pairs and quotient
acyclicity, `State`) is checked only for improving moves, which are rare, so a pass costs
O(E) plus a replay per accepted move. Every accepted move lowers the cost, so it terminates."""
from __future__ import annotations

from ..problem import Problem
from .state import State


def legal(p: Problem, label: list[int]) -> bool:
    """Is the assignment node -> label legal? Replays it in topological order through State,
    numbering groups by first appearance (State opens groups in that order)."""
    st, ids = State(p), {}
    for v in range(p.size):
        s = ids.setdefault(label[v], len(ids))
        if s < len(st.members) and not st.can_join(v, s):
            return False
        st.join(v, s)
    return True


def improve(p: Problem, groups, max_passes: int = 20) -> list[tuple[int, ...]]:
    """A plan no worse than `groups` (legal groups of p), as groups of local indices."""
    label = [0] * p.size
    for k, grp in enumerate(groups):
        for i in grp:
            label[i] = k
    nbrs = [[] for _ in range(p.size)]
    for u, v, w in p.edges:
        nbrs[u].append((v, w))
        nbrs[v].append((u, w))
    fresh = len(groups)
    for _ in range(max_passes):
        moved = False
        for u, v, _ in p.edges:                       # merges across cut edges
            a, b = label[u], label[v]
            if a != b and _try(p, label, [i for i in range(p.size) if label[i] == b], a, nbrs):
                moved = True
        for v in range(p.size):                       # single-node moves
            for t in {label[u] for u, _ in nbrs[v]} | {fresh}:
                if t != label[v] and _try(p, label, [v], t, nbrs):
                    moved = True
                    fresh += t == fresh
                    break
        if not moved:
            break
    out: dict[int, list[int]] = {}
    for i, s in enumerate(label):
        out.setdefault(s, []).append(i)
    return [tuple(g) for g in out.values()]


def _try(p, label, nodes, target, nbrs) -> bool:
    """Relabel `nodes` to `target` if that strictly lowers the cut and stays legal."""
    moving = set(nodes)
    delta = 0
    for x in nodes:
        for y, w in nbrs[x]:
            if y in moving:
                continue
            delta += (w if label[y] == label[x] else 0) - (w if label[y] == target else 0)
    if delta >= 0:
        return False
    old = [label[x] for x in nodes]
    for x in nodes:
        label[x] = target
    if legal(p, label):
        return True
    for x, s in zip(nodes, old):
        label[x] = s
    return False
