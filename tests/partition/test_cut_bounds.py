"""The second cuts on odd spiders (`spiders.py`) that close random n=300 seed=1's root gap,
checked as lower bounds: at every prefix of every legal plan of small random components
(brute force over set partitions), and on larger components through branch-and-bound's
proved optimum against the compact MILP where SciPy is available."""
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers.bnb import _Search, solve_bnb
from evt_core.partition.solvers.packing import pack_bound
from evt_core.partition.solvers.state import cost_of

from .test_solver_bounds import brute_force, check_bounds_along_plan, legal_plans


def components(seed: int, n: int, p_multi: float = 0.05):
    g = random_graph(random.Random(seed), n, p_multi=p_multi)
    d = decompose(g)
    return [make_problem(g, d, tuple(c)) for c in d.components if len(c) > 1]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 14))
def test_bounds_hold_along_every_legal_plan(seed, n):
    for p in components(seed, n):
        if p.size <= 7:
            for cost, label in legal_plans(p):
                check_bounds_along_plan(p, label, cost)
        if p.size <= 8:
            assert solve_bnb(p).cost == brute_force(p)[0], f"repro: seed={seed} n={n}"


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(30, 70))
def test_bnb_optimum_is_the_milp_optimum(seed, n):
    pytest.importorskip("scipy.optimize")
    from evt_core.partition.solvers.cut_milp import solve_cut_milp
    for p in components(seed, n):
        got = solve_bnb(p, time_limit=60)
        _, cost, proved = solve_cut_milp(p, time_limit=60)
        if got.optimal and proved:
            assert got.cost == cost, f"repro: seed={seed} n={n}"


def largest(n: int, seed: int):
    g = random_graph(random.Random(1000 * n + seed), n)
    d = decompose(g)
    return make_problem(g, d, tuple(max(d.components, key=len)))


def root_bound(p) -> int:
    """The search's bound before any branching, with no early stop (need=None)."""
    s = _Search(p, [tuple(range(p.size))], 1 << 62, None)
    lb, und = s.bound(0)
    return lb + pack_bound(p.size, und, s.st.grp, s.st.members, p.forbid, 0, None, s.blocked,
                           spiders=True)


@pytest.mark.parametrize("seed,edges", [(0, 36), (1, 32)])
def test_root_bound_of_the_largest_benchmark_graphs(seed, edges):
    # 34 and 31 edges of 8192 B without second cuts; optima 41 and 33 (MILP).
    p = largest(300, seed)
    assert root_bound(p) >= edges * 8192


def test_random_n300_seed1_is_proved():
    p = largest(300, 1)
    sol = solve_bnb(p, time_limit=60)
    assert sol.optimal and sol.cost - p.fixed_cost == 33 * 8192
    assert cost_of(p, sol.groups) == sol.cost
