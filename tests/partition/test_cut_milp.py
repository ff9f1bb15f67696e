"""The compact MILP (`solvers/cut_milp.py`) that certifies large components' optima: on random
components its plan is legal (replayed through `State`) and costs the proved branch-and-bound
optimum (brute force over set partitions on the smallest ones), and its multicut relaxation
without acyclicity never costs more. The last cases are components where acyclicity binds
(the relaxation is cheaper), so the potentials are checked to exclude exactly the cyclic plans."""
import random

import pytest

from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers.bnb import solve_bnb
from evt_core.partition.solvers.lns import labels
from evt_core.partition.solvers.local import legal

from .test_solver_bounds import brute_force

pytest.importorskip("scipy.optimize")
from evt_core.partition.solvers.cut_milp import solve_cut_milp  # noqa: E402


def components(seed: int, n: int):
    rng = random.Random(seed)
    g = random_graph(rng, n, p_multi=0.05)
    d = decompose(g)
    return [make_problem(g, d, tuple(c)) for c in d.components if len(c) > 1]


SMALL = [(500 + s, random.Random(s).randint(10, 45)) for s in range(12)]
ACYCLIC_BINDS = [(701, 48), (727, 81), (738, 80)]


@pytest.mark.parametrize("seed,n", SMALL + ACYCLIC_BINDS)
def test_cut_milp_matches_bnb_optimum(seed, n):
    binds = False
    for p in components(seed, n):
        groups, cost, proved = solve_cut_milp(p, time_limit=60)
        want = solve_bnb(p)
        assert want.optimal and proved
        assert sorted(i for g in groups for i in g) == list(range(p.size))
        assert legal(p, labels(p, groups))
        assert cost == want.cost
        if p.size <= 8:
            assert cost == brute_force(p)[0]
        _, relaxed, ok = solve_cut_milp(p, time_limit=60, acyclic=False)
        assert ok and relaxed <= cost
        binds |= relaxed < cost
    assert binds == ((seed, n) in ACYCLIC_BINDS)
