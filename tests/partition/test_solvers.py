import random

import pytest

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES, bert_layer
from evt_core.partition.random_graphs import random_graph


@pytest.mark.parametrize("seed", range(40))
def test_bnb_matches_brute_force(seed):
    rng = random.Random(seed)
    g = random_graph(rng, rng.randint(3, 8))
    best, _ = P.exhaustive_optimum(g)
    plan = P.partition(g, cache=None)
    plan.check()
    assert plan.optimal and plan.cost == best


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_bnb_equals_milp(name):
    g = EXAMPLES[name]()
    for graph in (g, P.run_pipeline(g)):
        b = P.partition(graph, cache=None)
        m = P.partition(graph, solver="milp", cache=None, time_limit=60)
        b.check(); m.check()
        assert b.optimal and m.optimal and b.cost == m.cost
        gr = P.partition(graph, solver="greedy")
        gr.check()
        assert gr.cost >= b.cost


def test_stats_and_groups_are_executable_order():
    plan = P.partition(bert_layer(), cache=None)
    assert plan.stats.solver == "bnb" and plan.stats.proved_optimal and plan.stats.time_s < 5
    seen = set()
    for grp in plan.groups:
        for n in grp:
            assert all(i in seen or i in grp or plan.graph.nodes[i].kind in (P.Kind.INPUT, P.Kind.CONST)
                       for i in plan.graph.nodes[n].inputs)
        seen.update(grp)


def test_cache_solves_repeated_layers_once():
    cache = P.SolutionCache()
    first = P.partition(bert_layer(), cache=cache)
    again = P.partition(bert_layer(batch=32), cache=cache)
    assert again.stats.searched == 0 and again.stats.cache_hits > 0
    assert again.cost == first.cost and again.groups == first.groups


def test_time_limit_returns_a_legal_plan():
    g = random_graph(random.Random(1002), 60)
    plan = P.partition(g, cache=None, time_limit=0.05)
    plan.check()
    assert plan.stats.time_s < 5


def test_unknown_solver():
    with pytest.raises(P.PartitionError, match="solver"):
        P.partition(bert_layer(), solver="cplex")
