"""Large-neighbourhood search: improve a legal plan by re-solving windows of it exactly.

A window W is a union of whole incumbent groups around a random node. Every other incumbent
group is contracted to one item (`contract.py`), and the exact search (`bnb._Search`: memo,
per-node bound, path packing) solves the resulting problem of |W| + #other-groups items within
a node budget, from the incumbent (a plan of the contracted problem, so a window never loses
it). Its plans expand to legal plans of the whole problem at the same cost.

Why: on the large random graphs the greedy + local-search incumbent is a few cuts above the
optimum, and the exact search spends most of its time finding better plans rather than
proving one (random n=200 seed=1: 13.5 s from the incumbent, 1.5 s from the optimum). An
earlier window search with a bound of its own (fixed nodes by label, no memo) hit its node
budget on every 40-node window of that graph and never reached the optimum; the contracted
windows settle in ~20 ms each and reach it in 0.4 s."""
from __future__ import annotations

import random
import time

from ..problem import Problem, bits
from .contract import contract, expand
from .state import cost_of


def labels(p: Problem, groups) -> list[int]:
    lab = [0] * p.size
    for k, grp in enumerate(groups):
        for i in grp:
            lab[i] = k
    return lab


def group_window(p: Problem, adj: list[int], lab: list[int], seed: int, size: int,
                 rng: random.Random) -> int:
    """Whole incumbent groups, grown from seed's group through neighbouring groups (random
    order) while the union holds at most `size` nodes (at least seed's group)."""
    members: dict[int, int] = {}
    for v, l in enumerate(lab):
        members[l] = members.get(l, 0) | 1 << v
    win, queue, taken = members[lab[seed]], [lab[seed]], {lab[seed]}
    while queue:
        m = members[queue.pop(rng.randrange(len(queue)))]
        nb = 0
        for i in bits(m):
            nb |= adj[i]
        for v in bits(nb & ~win):
            t = lab[v]
            if t not in taken and (win | members[t]).bit_count() <= size:
                taken.add(t)
                win |= members[t]
                queue.append(t)
    return win


def improve_lns(search, deadline: float, size: int = 40, budget: int = 3000,
                patience: int = 60, seed: int = 0) -> None:
    """Re-solve windows of `search`'s incumbent (a bnb._Search) until the deadline or
    `patience` windows in a row bring nothing; search.best_* only ever improves, and
    search.explored counts the windows' nodes."""
    p, rng, stale = search.p, random.Random(seed), 0
    while stale < patience and time.perf_counter() < deadline:
        lab = labels(p, search.best_groups)
        win = group_window(p, search.adj, lab, rng.randrange(p.size), size, rng)
        cost, groups = solve_window(search, win, budget, deadline)
        if cost < search.best_cost:
            search.best_cost, search.best_groups = cost, groups
            stale = 0
        else:
            stale += 1


def solve_window(search, win: int, budget: int, deadline: float):
    """(cost without p's fixed bytes, groups of p) of the best plan found that keeps every
    incumbent group outside `win` whole; never worse than the incumbent."""
    from .bnb import _Search, _Timeout
    p = search.p
    sub, items, inc = contract(p, search.best_groups, win)
    w = _Search(sub, inc, cost_of(sub, inc), None)
    w.deadline, w.node_limit = deadline, budget
    try:
        w.rec(0, 0)
    except _Timeout:
        pass
    search.explored += w.explored
    return w.best_cost + sub.fixed_cost - p.fixed_cost, expand(items, w.best_groups)
