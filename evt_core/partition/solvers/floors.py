"""Component floors: a lower bound for a problem that merges several components.

The driver merges components whose plans form a quotient cycle and re-solves their union M.
Each former component X was solved alone, with the rest of the graph as singletons, to a
proved optimum opt_X. Every legal plan of M restricted to X is a legal plan of X's problem
(groups never span components; a path between two nodes of one group that leaves it in the
finer plan of X's problem also leaves it in M's plan, and a quotient cycle of X's problem
maps onto a closed walk through >= 2 distinct groups of M's plan, hence a cycle). So in every
legal plan of M the bytes cut inside X are >= opt_X: the *floor* of X.

The search counts only M's non-fixed edges, so a floor is stored as opt_X minus the bytes of
X's internal edges that M fixes (always cut). Each unplaced node's in-edges and each packed
path lie inside one component (edges between components are fixed, and groups never span
them), so the per-node charges and a packing over one component's undecided edges bound
that component's future cut alone. The bound is then

    sum over X of max(cut so far in X + bound of X, floor of X)  -  cut so far,

never below the plain bound's per-component sum. On the merged random n=250 seed=1 problem
(186 nodes, optimum one cut above the sum of the parts' optima) proving the optimum from it
took 15555 search nodes / 11.4 s against 15911 / 12.5 s: once the threshold is one cut above
the floors' sum, any state that cuts a part's edge beyond its optimum prunes at once.
Floors are true facts about legal plans (not path-dependent relaxations), so the
dominance memo stays sound: it records bounds on completions only."""
from __future__ import annotations

from ..legality import groups_on_cycles
from .packing import pack_bound


class Floors:
    """label[v]: which former component node v belongs to (0..m-1); floor[c]: lower bound on
    the non-fixed bytes cut inside component c in every legal plan (0 when unknown)."""

    def __init__(self, label, floor):
        self.label = tuple(label)
        self.floor = tuple(floor)
        self.cut = [0] * len(self.floor)        # non-fixed bytes cut so far, per component

    def add(self, v: int, w: int) -> None:
        """Record (w > 0) or undo (w < 0) the in-edge cut of placing v."""
        self.cut[self.label[v]] += w


def floored_lower(search, k: int, cost: int) -> int:
    """Lower bound on the future non-fixed cost of `search`'s state at depth k entered at
    `cost` (== sum(floors.cut)). The biggest component's packing goes last and stops as soon
    as the total prunes."""
    fl, p, st = search.floors, search.p, search.st
    m = len(fl.floor)
    lbs, unds = [0] * m, [[] for _ in range(m)]
    for v, L, spare in search.node_charges(k):
        c = fl.label[v]
        lbs[c] += L
        unds[c].extend(spare)
    cheap = sum(max(fl.cut[c] + lbs[c], fl.floor[c]) for c in range(m))
    if cheap >= search.best_cost:                # prunes without any packing
        return cheap - cost
    order = sorted(range(m), key=lambda c: len(unds[c]))
    total = 0
    for i, c in enumerate(order):
        base = fl.cut[c] + lbs[c]
        if not unds[c]:
            total += max(base, fl.floor[c])
            continue
        if i == m - 1:                           # bytes its packing must find to prune
            need = search.best_cost - total - base
            if need <= 0 or fl.floor[c] >= search.best_cost - total:
                return total + max(base, fl.floor[c]) - cost
        else:
            need = None
        packed = pack_bound(p.size, unds[c], st.grp, st.members, p.forbid, k, need,
                            search.blocked, search.gforbid)
        total += max(base + packed, fl.floor[c])
    return total - cost


def break_cycles(p, groups) -> list[tuple[int, ...]]:
    """A legal plan of p from `groups` (a partition of p's nodes whose quotient may have
    cycles, e.g. the union of merged components' plans): every group on a quotient cycle is
    split into singletons. Legal: a cycle of the new quotient maps onto a closed walk of the
    old one, inside one of its strongly connected components; a non-trivial one is now all
    singletons (a cycle among them would be a cycle of p's acyclic order relation), and a
    trivial one is a single group (no cycle). Forbidden pairs never shared a group (each part's
    plan was legal for its own problem, whose forbid includes p's within the part)."""
    where = {v: k for k, grp in enumerate(groups) for v in grp}
    succ = [set() for _ in groups]
    for v in range(p.size):
        for u in p.order[v]:
            if where[u] != where[v]:
                succ[where[u]].add(where[v])
    cyclic = groups_on_cycles(succ)
    return [piece for k, grp in enumerate(groups)
            for piece in ([(v,) for v in grp] if k in cyclic else [tuple(grp)])]
