"""The branch-and-bound's lower bounds and local search, checked against brute force over
set partitions of a component `Problem` (legality by replaying through `State`)."""
import random

import pytest

from evt_core import partition as P
from evt_core.partition.exhaustive import set_partitions
from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers.bnb import _Search
from evt_core.partition.solvers.greedy import solve_greedy
from evt_core.partition.solvers.local import improve, legal
from evt_core.partition.solvers.memo import Memo
from evt_core.partition.solvers.packing import pack_bound
from evt_core.partition.solvers.precede import blocked_groups
from evt_core.partition.solvers.state import cost_of


def problems(g):
    d = decompose(g)
    return [make_problem(g, d, tuple(c)) for c in d.components if len(c) > 1]


def brute_force(p):
    """(optimal cost, labels) of a problem over all set partitions of its nodes."""
    best = None
    for part in set_partitions(list(range(p.size))):
        label = [0] * p.size
        for k, grp in enumerate(part):
            for i in grp:
                label[i] = k
        if legal(p, label):
            cost = cost_of(p, part)
            if best is None or cost < best[0]:
                best = (cost, label)
    return best


def check_bounds_along_optimum(p) -> None:
    """At every prefix of an optimal plan, cut-so-far + both bounds <= the optimum."""
    opt, label = brute_force(p)
    check_bounds_along_plan(p, label, opt)


def legal_plans(p):
    """(cost, labels) of every legal plan of p."""
    for part in set_partitions(list(range(p.size))):
        label = [0] * p.size
        for k, grp in enumerate(part):
            for i in grp:
                label[i] = k
        if legal(p, label):
            yield cost_of(p, part), label


def check_bounds_along_plan(p, label, plan_cost) -> None:
    """At every prefix of the legal plan `label`: cut-so-far + both bounds <= its cost, and
    no later node is blocked (acyclicity, `blocked_groups`) from the open group it ends in."""
    s = _Search(p, [tuple(range(p.size))], 10**18, None)
    st, ids, cost = s.st, {}, p.fixed_cost
    for k in range(p.size + 1):
        lb, und = s.bound(k)
        packed = pack_bound(p.size, und, st.grp, st.members, p.forbid, k, None, s.blocked,
                            spiders=True)
        assert cost + lb + packed <= plan_cost, (k, cost, lb, packed, plan_cost)
        assert s.blocked == blocked_groups(p, st, k)
        for x in range(k, p.size):
            if label[x] in ids:
                assert not s.blocked[x] >> ids[label[x]] & 1, (k, x)
        if k == p.size:
            break
        gain = st.gains(k)
        grp = ids.setdefault(label[k], len(ids))
        st.join(k, grp)
        cost += s.total_in[k] - gain.get(grp, 0)
    assert cost == plan_cost


@pytest.mark.parametrize("seed", range(25))
def test_bounds_never_exceed_the_optimum(seed):
    rng = random.Random(seed)
    for p in problems(random_graph(rng, rng.randint(6, 14))):
        if p.size <= 8:
            check_bounds_along_optimum(p)


@pytest.mark.parametrize("seed", range(25))
def test_bounds_hold_along_every_legal_plan(seed):
    # Stronger than along an optimum: the bounds at a prefix bound every completion of it.
    rng = random.Random(500 + seed)
    for p in problems(random_graph(rng, rng.randint(6, 12))):
        if p.size <= 7:
            for cost, label in legal_plans(p):
                check_bounds_along_plan(p, label, cost)


@pytest.mark.parametrize("seed", range(12))
def test_memo_does_not_change_the_optimum(seed, monkeypatch):
    # Same optimum with the dominance memo switched off (lookup never prunes, record no-op).
    rng = random.Random(900 + seed)
    g = random_graph(rng, rng.randint(20, 45))
    with_memo = P.partition(g, cache=None, time_limit=20)
    monkeypatch.setattr(Memo, "lookup", lambda self, *a: (False, None))
    monkeypatch.setattr(Memo, "prunes", lambda self, *a: False)
    monkeypatch.setattr(Memo, "record", lambda self, *a: None)
    without = P.partition(g, cache=None, time_limit=20)
    with_memo.check()
    assert with_memo.optimal and without.optimal and with_memo.cost == without.cost


@pytest.mark.parametrize("seed", range(25))
def test_local_search_is_legal_and_no_worse(seed):
    rng = random.Random(100 + seed)
    for p in problems(random_graph(rng, rng.randint(10, 60))):
        start = solve_greedy(p)
        groups = improve(p, start.groups)
        label = [0] * p.size
        for k, grp in enumerate(groups):
            for i in grp:
                label[i] = k
        assert legal(p, label) and cost_of(p, groups) <= start.cost
        assert sorted(i for grp in groups for i in grp) == list(range(p.size))


def test_packing_counts_a_path_between_two_groups():
    # Two placed groups joined by a chain of two undecided edges: one of them must be cut.
    und = [(0, 2, 5), (2, 3, 7), (1, 3, 9)]
    grp, members, forbid = [0, 1, -1, -1], [0b01, 0b10], [0, 0, 0, 0]
    assert pack_bound(4, und, grp, members, forbid, 2) == 5


def test_packing_respects_capacity_and_stops_at_need():
    und = [(0, 1, 4), (1, 2, 4)]
    forbid = [0b100, 0, 0b001]        # 0 and 2 may not share a group
    assert pack_bound(3, und, [-1] * 3, [], forbid, 0) == 4
    assert pack_bound(3, und, [-1] * 3, [], forbid, 0, need=2) >= 2


def test_benchmark_graph_that_used_to_time_out_is_proved():
    g = random_graph(random.Random(100 * 1000 + 1), 100)
    plan = P.partition(g, cache=None, time_limit=30)
    plan.check()
    assert plan.optimal and plan.cost <= 394624


def test_benchmark_graph_n200_seed0_is_proved():
    # Unproved within 10 s before the dominance memo (bench notes).
    g = random_graph(random.Random(200 * 1000 + 0), 200)
    plan = P.partition(g, cache=None, time_limit=60)
    plan.check()
    assert plan.optimal and plan.cost == 673920


def test_packing_counts_two_cuts_for_three_conflicting_leaves():
    # A star: hub 0, leaves 1, 2, 3 pairwise forbidden. Paths alone pack one unit (LP: 3/2);
    # growing the packed path into the star gives the two cuts any plan needs.
    und = [(0, 1, 1), (0, 2, 1), (0, 3, 1)]
    forbid = [0, 0b1100, 0b1010, 0b0110]
    assert pack_bound(4, und, [-1] * 4, [], forbid, 0) == 2


def test_packing_grows_trees_only_to_terminals_conflicting_with_all():
    # Leaf 3 conflicts with 1 but not with 2: the tree {1, 2} may not take it.
    und = [(0, 1, 1), (0, 2, 1), (0, 3, 1)]
    forbid = [0, 0b1100, 0b0010, 0b0010]
    assert pack_bound(4, und, [-1] * 4, [], forbid, 0) == 1


def test_packing_counts_two_cuts_for_an_odd_spider():
    # Hub 0 with arms 0-1-2, 0-3-4, 0-5-6; conflicts 1-4, 3-6, 5-2: the three conflict paths
    # share an edge pairwise but none is on all three, so any plan cuts two edges. The LP
    # (and the path packing) pays 3/2 resp. 1; the spider (spiders.py) finds the second cut.
    und = [(0, 1, 1), (1, 2, 1), (0, 3, 1), (3, 4, 1), (0, 5, 1), (5, 6, 1)]
    pairs = [(1, 4), (3, 6), (5, 2)]
    forbid = [0] * 7
    for a, b in pairs:
        forbid[a] |= 1 << b
        forbid[b] |= 1 << a
    assert pack_bound(7, und, [-1] * 7, [], forbid, 0) == 1
    assert pack_bound(7, und, [-1] * 7, [], forbid, 0, spiders=True) == 2

