"""The objective equals the bytes the plan's cut edges actually move, measured on evaluated
arrays (not on the types the cost model reads), on random graphs with multi-output ops read
both through getitem and directly."""
import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from evt_core import partition as P
from evt_core.partition.random_graphs import random_graph
from helpers import make_inputs


def measured_cut_bytes(g, groups) -> int:
    # The random graphs' opaque op is an identity here: only the sizes matter.
    env = P.evaluate(g, make_inputs(g), impls={"custom_op": lambda arg0: arg0}, keep_all=True)
    where = {n: k for k, grp in enumerate(groups) for n in grp}
    total = 0
    for v in g.compute_nodes():
        node = g.nodes[v]
        for u in dict.fromkeys(node.inputs):
            if u not in where or where[u] == where[v]:
                continue
            value = env[u]
            if isinstance(value, tuple):        # what v reads of a tuple: its getitem or output 0
                value = value[node.attr("index")] if node.op == "getitem" else value[0]
            total += np.asarray(value).nbytes
    return total


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(3, 30))
def test_plan_cost_is_the_bytes_on_its_cut_edges(seed, n):
    g = random_graph(random.Random(seed), n, m=8, p_multi=0.2)
    plan = P.partition(g, cache=None, time_limit=5)
    plan.check()
    assert plan.cost == measured_cut_bytes(g, plan.groups), f"repro: seed={seed} n={n}"
    milp = P.partition(g, solver="milp", cache=None, time_limit=5)
    assert milp.cost == measured_cut_bytes(g, milp.groups)
    if plan.optimal and milp.optimal:
        assert plan.cost == milp.cost


def test_a_direct_read_of_layer_norm_is_charged_one_output():
    g = P.Graph()
    x = g.input("x", (8, 16), "float16")
    ln = g.add("native_layer_norm", x, [16], None, None, 1e-5)
    w = g.input("w", (16, 4), "float16")
    y = g.add("mm", ln, w)                 # reads output 0 only
    rstd = g.add("getitem", ln, -1)        # negative index addresses output 2
    g.output(y, g.add("relu", rstd))
    assert g.edge_bytes(ln.name, y.name) == 8 * 16 * 2
    assert g.edge_bytes(ln.name, rstd.name) == 8 * 4
    plan = P.partition(g, cache=None)
    assert plan.cost == measured_cut_bytes(g, plan.groups)
