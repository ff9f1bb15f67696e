"""Window re-solving (solvers/lns.py, contract.py): every plan it keeps is legal and no worse,
a window never loses the incumbent, contraction keeps costs, and the phased search still
proves the optimum."""
import random
import time

import pytest

from evt_core import partition as P
from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers import bnb
from evt_core.partition.solvers.greedy import solve_greedy
from evt_core.partition.solvers.lns import group_window, improve_lns, labels
from evt_core.partition.solvers.local import legal
from evt_core.partition.solvers.state import cost_of


def problems(g):
    d = decompose(g)
    return [make_problem(g, d, tuple(c)) for c in d.components if len(c) > 1]


@pytest.mark.parametrize("seed", range(12))
def test_windows_keep_plans_legal_and_no_worse(seed):
    rng = random.Random(500 + seed)
    for p in problems(random_graph(rng, rng.randint(20, 80))):
        start = solve_greedy(p)
        search = bnb._Search(p, start.groups, start.cost, None)
        improve_lns(search, time.perf_counter() + 0.3, size=12, budget=300, patience=8, seed=seed)
        groups = search.best_groups
        assert cost_of(p, groups) - p.fixed_cost == search.best_cost <= start.cost - p.fixed_cost
        assert legal(p, labels(p, groups))
        assert sorted(i for grp in groups for i in grp) == list(range(p.size))
        assert search.node_limit is None


@pytest.mark.parametrize("seed", range(6))
def test_group_window_holds_whole_groups(seed):
    rng = random.Random(600 + seed)
    for p in problems(random_graph(rng, 60)):
        groups = solve_greedy(p).groups
        lab = labels(p, groups)
        search = bnb._Search(p, groups, cost_of(p, groups), None)
        win = group_window(p, search.adj, lab, 0, 10, rng)
        inside = {lab[v] for v in range(p.size) if win >> v & 1}
        assert all(win >> v & 1 for v in range(p.size) if lab[v] in inside)


def test_phased_search_proves_the_same_optimum(monkeypatch):
    # Force the phases (windows, then the search) onto a problem bnb proves.
    g = random_graph(random.Random(7), 40)
    plain = P.partition(g, cache=None)
    monkeypatch.setattr(bnb, "LNS_MIN_SIZE", 2)
    phased = P.partition(g, cache=None)
    phased.check()
    assert phased.optimal and plain.optimal and phased.cost == plain.cost


@pytest.mark.parametrize("seed", range(40))
def test_contracted_window_plans_expand_to_legal_plans_of_equal_cost(seed):
    # Every legal plan of the contracted problem (brute force) is a legal plan of the whole
    # problem at the same cost, and the incumbent is one of them.
    from evt_core.partition.exhaustive import set_partitions
    from evt_core.partition.solvers.contract import contract, expand
    rng = random.Random(700 + seed)
    for p in problems(random_graph(rng, rng.randint(10, 30))):
        groups = solve_greedy(p).groups
        search = bnb._Search(p, groups, cost_of(p, groups), None)
        win = group_window(p, search.adj, labels(p, groups), rng.randrange(p.size), 4, rng)
        sub, items, inc = contract(p, groups, win)
        assert cost_of(sub, inc) == cost_of(p, groups)
        assert sorted(v for it in items for v in it) == list(range(p.size))
        if sub.size > 8:
            continue
        for part in set_partitions(list(range(sub.size))):
            if legal(sub, labels(sub, part)):
                full = expand(items, part)
                assert legal(p, labels(p, full)), (seed, part)
                assert cost_of(p, full) == cost_of(sub, part)


def test_edge_search_after_a_short_node_search_proves_the_same_optimum(monkeypatch):
    # A node search cut short at once (NODE_SHARE ~ 0) hands over to the edge search
    # (edges.py); the proof and the cost must not change.
    g = random_graph(random.Random(7), 40)
    plain = P.partition(g, cache=None)
    monkeypatch.setattr(bnb, "LNS_MIN_SIZE", 2)
    monkeypatch.setattr(bnb, "NODE_SHARE", 1e-9)
    phased = P.partition(g, cache=None, time_limit=60)
    phased.check()
    assert phased.optimal and plain.optimal and phased.cost == plain.cost
