"""Large-neighbourhood search: improve a legal plan by re-solving windows of it exactly.

A window W is a connected ball of nodes (undirected BFS from a seed). Every node outside W
keeps its incumbent group: in the search it may only join a group already holding an earlier
node with its incumbent label (or open one if there is none), so the incumbent itself is one
completion and every completion is a legal plan of the whole problem. Nodes of W branch
freely. The branch-and-bound's bounds stay valid (they bound the unrestricted completions, a
superset); its dominance memo does not (the restriction depends on groups the signature does
not name), so windows search without one, under a node budget.

Why: on the large random graphs the greedy + local-search incumbent is a few cuts above the
optimum, and the exact search spends most of its time finding better plans rather than
proving one (started from the optimum, it proves it 2-3x faster)."""
from __future__ import annotations

import random
import time

from ..problem import Problem
from .state import State


class NoMemo:
    """A memo that never prunes and records nothing (windows change the problem)."""

    def lookup(self, *args):
        return False, None

    def prunes(self, *args) -> bool:
        return False

    def record(self, *args) -> None:
        pass


def window(p: Problem, adj: list[int], seed: int, size: int, rng: random.Random) -> int:
    """Mask of up to `size` nodes: BFS from `seed` over undirected edges, shuffled per layer."""
    win, frontier = 1 << seed, [seed]
    while frontier and win.bit_count() < size:
        nxt = []
        rng.shuffle(frontier)
        for x in frontier:
            m = adj[x] & ~win
            while m and win.bit_count() < size:
                low = m & -m
                m ^= low
                win |= low
                nxt.append(low.bit_length() - 1)
        frontier = nxt
    return win


def group_window(p: Problem, adj: list[int], lab: list[int], seed: int, size: int,
                 rng: random.Random) -> int:
    """Whole incumbent groups, grown from seed's group through neighbouring groups (random
    order) while the union holds at most `size` nodes (at least seed's group)."""
    members: dict[int, int] = {}
    for v, l in enumerate(lab):
        members[l] = members.get(l, 0) | 1 << v
    win, queue = members[lab[seed]], [lab[seed]]
    taken = {lab[seed]}
    while queue:
        l = queue.pop(rng.randrange(len(queue)))
        m = members[l]
        nb = 0
        while m:
            low = m & -m
            m ^= low
            nb |= adj[low.bit_length() - 1]
        for v in _bits(nb & ~win):
            t = lab[v]
            if t not in taken and (win | members[t]).bit_count() <= size:
                taken.add(t)
                win |= members[t]
                queue.append(t)
    return win


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def labels(p: Problem, groups) -> list[int]:
    lab = [0] * p.size
    for k, grp in enumerate(groups):
        for i in grp:
            lab[i] = k
    return lab


def improve_lns(search, deadline: float, size: int = 25, budget: int = 2000,
                patience: int = 40, seed: int = 0) -> None:
    """Re-solve windows of `search`'s incumbent until the deadline or `patience` windows in a
    row bring nothing; search.best_* is updated in place (it only ever improves). `search` is
    a bnb._Search; its memo and limits are restored on return."""
    from .bnb import _Timeout
    p, rng = search.p, random.Random(seed)
    memo, limit = search.memo, search.node_limit
    search.memo = NoMemo()
    stale = 0
    try:
        while stale < patience and time.perf_counter() < deadline:
            before = search.best_cost
            lab = labels(p, search.best_groups)
            win = group_window(p, search.adj, lab, rng.randrange(p.size), size, rng)
            search.restrict([-1 if win >> v & 1 else lab[v] for v in range(p.size)])
            search.node_limit = search.explored + budget
            try:
                search.rec(0, 0)
            except _Timeout:
                search.st = State(p)                  # a timeout leaves the state mid-search
            stale = 0 if search.best_cost < before else stale + 1
    finally:
        search.memo, search.node_limit = memo, limit
        search.restrict(None)
