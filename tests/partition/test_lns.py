"""Window re-solving (solvers/lns.py): every plan it keeps is legal and no worse, a window
never loses the incumbent, and the phased search still proves the optimum."""
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
    # Force the phases (first search, windows, resumed search) onto a problem bnb proves.
    g = random_graph(random.Random(7), 40)
    plain = P.partition(g, cache=None)
    monkeypatch.setattr(bnb, "LNS_MIN_SIZE", 2)
    monkeypatch.setattr(bnb, "FIRST_NODES", 5)
    phased = P.partition(g, cache=None)
    phased.check()
    assert phased.optimal and plain.optimal and phased.cost == plain.cost
