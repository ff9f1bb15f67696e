"""The edge search (`solvers/edges.py`): its bound never exceeds the cost of a legal plan
whose decisions it is given (any subset of that plan's kept and cut edges), its classes
never split a group of such a plan, and its optimum is brute force's (small components) and
the node search's (larger ones)."""
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from evt_core.partition.solvers.bnb import solve_bnb
from evt_core.partition.solvers.edges import EdgeSearch, _cycles
from evt_core.partition.solvers.lns import labels
from evt_core.partition.solvers.local import legal
from evt_core.partition.solvers.state import cost_of

from .test_cut_bounds import components
from .test_solver_bounds import brute_force, legal_plans


def optimum(p):
    """(cost with p's fixed cost, groups) by the edge search from a trivial incumbent."""
    s = EdgeSearch(p, sum(w for _, _, w in p.edges) + 1, [tuple(range(p.size))])
    assert s.run()
    assert legal(p, labels(p, s.best_groups))
    assert cost_of(p, s.best_groups) == s.best_cost + p.fixed_cost
    return s.best_cost + p.fixed_cost, s.best_groups


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 14), frac=st.floats(0, 1))
def test_bound_holds_for_every_legal_plan_and_decision_subset(seed, n, frac):
    rng = random.Random(seed)
    for p in components(seed, n):
        if p.size > 7:
            continue
        for cost, label in legal_plans(p):
            s = EdgeSearch(p, 10**18, [])
            fixed = 0
            for e, (u, v, w) in enumerate(p.edges):
                if rng.random() < frac:
                    s.set(e, 1 if label[u] == label[v] else 2)
                    fixed += w if label[u] != label[v] else 0
            cls, _ = s.classes()
            for u in range(p.size):
                for v in range(p.size):
                    if cls[u] == cls[v]:
                        assert label[u] == label[v], f"repro: seed={seed} n={n}"
            r = s.evaluate()
            assert r is not None, f"repro: seed={seed} n={n}"
            assert fixed + r[0] <= cost - p.fixed_cost, f"repro: seed={seed} n={n}"


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 40))
def test_edge_search_optimum_is_exact(seed, n):
    for p in components(seed, n):
        want = brute_force(p)[0] if p.size <= 8 else solve_bnb(p).cost
        assert optimum(p)[0] == want, f"repro: seed={seed} n={n}"


def test_cycles_are_the_strongly_connected_components():
    succ = {0: {1}, 1: {2}, 2: {0, 3}, 3: {4}, 4: {3}, 5: {0}}
    assert sorted(sorted(c) for c in _cycles(succ)) == [[0, 1, 2], [3, 4]]


def test_edge_search_proves_random_n300_seed0_from_its_optimum():
    # The node search does not prove it in 30 min (root bound 36 edges, optimum 41).
    from .test_cut_bounds import largest
    p = largest(300, 0)
    s = EdgeSearch(p, 41 * 8192, [])
    assert s.run() and s.best_cost == 41 * 8192          # nothing cheaper than 41 edges
