"""Component floors (solvers/floors.py), checked by brute force on merged problems: two
components of a small random graph merged into one Problem, as the driver does for a
quotient cycle. The floors and the floored bound never exceed what a legal plan pays."""
import itertools
import random

import pytest

from evt_core.partition import driver
from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers.bnb import _Search, solve_bnb
from evt_core.partition.solvers.floors import Floors, break_cycles, floored_lower
from evt_core.partition.solvers.local import legal
from evt_core.partition.solvers.state import cost_of

from .test_solver_bounds import brute_force, legal_plans


def merged_problems(rng, tries=40, max_size=8):
    """(graph, decomposition, merged problem, parts, solved) for pairs of components."""
    for _ in range(tries):
        g = random_graph(rng, rng.randint(8, 16))
        d = decompose(g)
        comps = [tuple(c) for c in d.components if len(c) > 1]
        for a, b in itertools.combinations(comps, 2):
            if len(a) + len(b) <= max_size:
                solved = {}
                for c in (a, b):
                    p = make_problem(g, d, c)
                    sol = solve_bnb(p)
                    solved[c] = ([[p.names[i] for i in grp] for grp in sol.groups], sol.optimal)
                yield g, d, make_problem(g, d, tuple(sorted(a + b))), [a, b], solved


def part_cut(p, fl, label):
    """Non-fixed bytes cut inside each part by the plan `label` of p."""
    cut = [0] * len(fl.floor)
    for u, v, w in p.edges:
        if label[u] != label[v]:
            cut[fl.label[v]] += w
    return cut


@pytest.mark.parametrize("seed", range(12))
def test_floors_and_floored_bound_hold_along_every_legal_plan(seed):
    rng = random.Random(3000 + seed)
    for g, d, p, parts, solved in merged_problems(rng):
        fl = driver._floors(g, d, p, parts, solved)
        for cost, label in legal_plans(p):
            assert all(c >= f for c, f in zip(part_cut(p, fl, label), fl.floor))
            s = _Search(p, [tuple(range(p.size))], 10**18, None, Floors(fl.label, fl.floor))
            ids, c = {}, 0
            for k in range(p.size + 1):
                assert c + floored_lower(s, k, c) <= cost - p.fixed_cost, (k, c, cost)
                if k == p.size:
                    break
                gain = s.st.gains(k)
                grp = ids.setdefault(label[k], len(ids))
                s.st.join(k, grp)
                w = s.total_in[k] - gain.get(grp, 0)
                s._charge(k, w)
                c += w


@pytest.mark.parametrize("seed", range(12))
def test_floored_search_and_seed_keep_the_optimum(seed):
    rng = random.Random(4000 + seed)
    for g, d, p, parts, solved in merged_problems(rng):
        opt, _ = brute_force(p)
        fl = driver._floors(g, d, p, parts, solved)
        local = {n: i for i, n in enumerate(p.names)}
        seed_groups = [tuple(local[n] for n in grp) for part in parts for grp in solved[part][0]]
        fixed = break_cycles(p, seed_groups)
        label = [0] * p.size
        for k, grp in enumerate(fixed):
            for i in grp:
                label[i] = k
        assert legal(p, label)
        sol = solve_bnb(p, floors=fl, seed=seed_groups)
        assert sol.optimal and sol.cost == opt == cost_of(p, sol.groups)
