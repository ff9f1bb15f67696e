"""Refinements of a solved plan that keep its cost and legality but choose, among tied plans,
the one the GPU kernels run best."""
from __future__ import annotations

from .cost import plan_cost
from .errors import PartitionError
from .graph import Graph
from .legality import check_plan
from .optable import GEMMS, LAYOUT_INTO_GEMM
from .plan import Plan


def layouts_with_their_gemm(g: Graph, plan: Plan) -> Plan:
    """Move each 2-D transpose that only GEMMs of one other group read into that group, where
    it is the GEMM operand's layout (a strided read), instead of a permuted store of the group
    that computes its source. Invariant: the plan's cost is unchanged (the cut edge moves from
    the transpose's output to its input, the same bytes), and a move that would break a
    legality rule is not made. Why: the solver sees a tie, but a permuted store is a column-major
    epilogue store (no TMA store, no packed 16-bit writes), while a transposed GEMM operand is
    an MN-major TMA load."""
    groups = [list(grp) for grp in plan.groups]
    where = {n: k for k, grp in enumerate(groups) for n in grp}
    users = g.users()
    moved = False
    for name, k in list(where.items()):
        node = g.nodes[name]
        readers = users[name]
        if node.op not in LAYOUT_INTO_GEMM or len(node.shape) != 2 or name in g.outputs or not readers:
            continue
        homes = {where[u] for u in readers}
        if len(homes) != 1 or k in homes or not all(g.nodes[u].op in GEMMS for u in readers):
            continue
        target = homes.pop()
        trial = [list(grp) for grp in groups]
        trial[k].remove(name)
        trial[target].insert(0, name)
        try:
            check_plan(g, trial)
        except PartitionError:
            continue
        groups, where[name], moved = trial, target, True
    if not moved:
        return plan
    groups = [grp for grp in groups if grp]
    return Plan(g, groups, plan_cost(g, groups), plan.optimal, plan.stats)


_WIDTH = {"float16": 2, "bfloat16": 2, "float32": 4}


def narrow_stores(g: Graph, plan: Plan) -> Plan:
    """Move each widening cast (`_to_copy` from a 16-bit float to fp32) whose value a GEMM group
    stores (computed from the group, read by another group, not a graph output) out of the
    group, with the group's nodes that depend on it, so the group stores the 16-bit value. For
    executors whose other ops are compiled by a fusing compiler (inductor), which folds the cast
    into every reader: the wide tensor is then never written, and its readers load half the
    bytes. The solver's cost counts every ungrouped node as its own kernel, so it prefers the
    cast inside the group, storing fp32 (softmax cross-entropy's logits.float(): 1 GB written
    and read twice instead of 0.5 GB, measured bench/RESULTS-train.md). The dependants leave
    too (a decomposed log-softmax's row max of the cast, which the fusing compiler computes in
    the pass that reads the logits anyway); a cast the group reads but never stores stays, as in
    a U-turn whose loss the epilogue reduces. Invariant: the plan stays legal; a move that
    breaks a rule is not made."""
    groups = [list(grp) for grp in plan.groups]
    where = {n: k for k, grp in enumerate(groups) for n in grp}
    users = g.users()
    moved = []
    for name in list(where):
        node, k = g.nodes[name], where[name]
        if node.op != "_to_copy" or name in g.outputs or not node.inputs:
            continue
        src = node.inputs[0]
        if (where.get(src) != k or _WIDTH.get(g.nodes[src].dtype, 4) >= _WIDTH.get(node.dtype, 0)
                or all(where.get(u) == k for u in users[name])
                or not any(g.nodes[n].op in GEMMS for n in groups[k])):
            continue
        tail = _dependants_in(groups[k], name, users)
        trial = [list(grp) for grp in groups]
        trial[k] = [n for n in trial[k] if n not in tail]
        trial[k + 1:k + 1] = [[n] for n in groups[k] if n in tail]
        try:
            check_plan(g, trial)
        except PartitionError:
            continue
        groups = trial
        where = {n: j for j, grp in enumerate(groups) for n in grp}
        moved.append(name)
    if not moved:
        return plan
    return Plan(g, groups, plan_cost(g, groups), plan.optimal, plan.stats)


def _dependants_in(group: list[str], name: str, users) -> set[str]:
    """`name` and every node of `group` that reads it, directly or through the group."""
    out, stack = set(), [name]
    while stack:
        n = stack.pop()
        if n in out:
            continue
        out.add(n)
        stack.extend(u for u in users[n] if u in group)
    return out
