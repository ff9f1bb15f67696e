import pytest

from evt_core import partition as P


def _graph():
    g = P.Graph()
    x, w = g.input("x", (8, 8), "float16"), g.input("w", (8, 8), "float16")
    a = g.add("relu", x)
    t = g.add("t", a)
    m = g.add("mm", t, w)
    s = g.add("sum", m, [1], True)
    e = g.add("mul", m, s)
    m2 = g.add("mm", e, w)
    g.output(m2)
    return g


@pytest.mark.parametrize("groups,rule", [
    ([["relu"], ["t", "mm"], ["sum"], ["mul", "mm_1"]], "epilogue-only"),      # mul -> mm_1 prologue
    ([["relu", "t", "mm"], ["sum"], ["mul"], ["mm_1"]], "epilogue-only"),      # permute with producer
    ([["relu"], ["t", "mm", "sum", "mul"], ["mm_1"]], "reduction-leaf"),
    ([["relu"], ["t", "mm", "mul"], ["sum"], ["mm_1"]], "acyclic"),
    ([["relu", "sum"], ["t", "mm"], ["mul"], ["mm_1"]], "connected"),
    ([["relu"], ["t", "mm"], ["sum"]], "coverage"),
])
def test_each_rule_is_named(groups, rule):
    g = _graph()
    with pytest.raises(P.PartitionError) as err:
        P.check_plan(g, groups)
    assert rule in {v[0] for v in P.violations(g, groups)}
    assert err.value.nodes


def test_legal_plan_passes():
    g = _graph()
    P.check_plan(g, [["relu"], ["t", "mm", "sum"], ["mul"], ["mm_1"]])


def test_opaque_is_alone():
    g = P.Graph()
    x = g.input("x", (4, 4), "float16")
    a = g.add("relu", x)
    b = g.add("foo", a, shape=(4, 4), dtype="float16")
    g.output(b)
    assert "opaque" in {v[0] for v in P.violations(g, [["relu", "foo"]])}
    plan = P.partition(g)
    assert plan.groups == [["relu"], ["foo"]]


def test_one_anchor_per_group():
    g = P.Graph()
    x, w = g.input("x", (8, 8), "float16"), g.input("w", (8, 8), "float16")
    s = g.add("add", g.add("mm", x, w), g.add("mm", w, x))
    g.output(s)
    assert "one-anchor" in {v[0] for v in P.violations(g, [["mm", "mm_1", "add"]])}
    assert P.partition(g).cost == 8 * 8 * 2


def _misfit_graph():
    """mm (8, 16) and, sharing a 0-d scale with its epilogue, a (5,)-vector op that is not on
    the GEMM's frame (the shape of another layer's bias gradient)."""
    g = P.Graph()
    x, w, v, c = (g.input("x", (8, 4), "float32"), g.input("w", (4, 16), "float32"),
                  g.input("v", (5,), "float32"), g.input("c", (), "float32"))
    half = g.add("mul", c, 0.5)
    g.output(g.add("mul", g.add("mm", x, w), half), g.add("mul", v, half))
    return g


def test_an_op_off_the_gemm_frame_is_not_in_its_group():
    g = _misfit_graph()
    assert "frame" in {v[0] for v in P.violations(g, [["mul", "mm", "mul_1", "mul_2"]])}
    from evt_core.partition.rules import fits_frame
    assert fits_frame((16,), (8, 16)) and fits_frame((8, 1), (8, 16)) and fits_frame((), (8, 16))
    assert fits_frame((2, 8, 8), (8, 16)) and not fits_frame((5,), (8, 16))
    plan = P.partition(g, cache=None)
    plan.check()
    (grp,) = [grp for grp in plan.groups if "mm" in grp]
    assert "mul_2" not in grp and plan.optimal


def _joint_graph():
    """A linear layer's forward and backward in one graph, as aot_autograd's joint graph has
    it: y = gelu(x @ w) is returned (a forward output), the output gradient dy (stage 1, the
    backward's input) meets gelu'(h) in the backward: dh = dy * gelu'(h), dw = t(x) @ dh."""
    g = P.Graph()
    x, w = g.input("x", (8, 8), "float32"), g.input("w", (8, 8), "float32")
    dy = g.input("dy", (8, 8), "float32", stage=1)
    h = g.add("mm", x, w)
    y = g.add("gelu", h, approximate="tanh")
    dh = g.add("gelu_backward", dy, h, approximate="tanh")
    dw = g.add("mm", g.add("t", x), dh)
    g.output(y, dw)
    return g


def test_a_backward_op_is_not_in_a_forward_gemms_group():
    """Joint-graph bytes alone would put gelu_backward (it reads h) in the forward GEMM's
    group; the forward kernel runs before dy exists, so the stage rule forbids it, and the
    solvers keep it out."""
    from evt_core.partition.rules import stage_conflict, stages
    g = _joint_graph()
    st = stages(g)
    assert st.stage["gelu_backward"] == 1 and st.half["mm"] == 0 and st.half["mm_1"] == 1
    assert stage_conflict(st, "mm", "gelu_backward") and not stage_conflict(st, "mm_1", "gelu_backward")
    assert "stage" in {v[0] for v in P.violations(g, [["mm", "gelu", "gelu_backward"], ["t", "mm_1"]])}
    for solver in ("bnb", "greedy", "milp"):
        plan = P.partition(g, solver=solver, cache=None)
        plan.check()
        assert "gelu_backward" not in plan.groups[plan.group_of("mm")], (solver, plan.groups)


def test_a_forward_value_joins_a_backward_group_only_where_it_can_be_recomputed():
    """b = 2 relu(h) is a forward output the backward also reads; in the backward GEMM's group
    it would be recomputed from relu(h), which no backward op reads, so the backward is not
    handed it: the pair is forbidden. Had a backward op read relu(h), it would be allowed."""
    from evt_core.partition.rules import stage_conflict, stages
    g = P.Graph()
    x, w = g.input("x", (8, 8), "float32"), g.input("w", (8, 8), "float32")
    dy = g.input("dy", (8, 8), "float32", stage=1)
    h = g.add("mm", x, w)
    a = g.add("relu", h)
    b = g.add("mul", a, 2.0)
    back = g.add("mm", g.add("mul", dy, b), w)
    g.output(b, back)
    st = stages(g)
    assert st.half["mul"] == 0 and st.half["mm_1"] == 1
    assert stage_conflict(st, "mm_1", "mul") and "mul" not in st.recomputable
    g.output(g.add("mul", dy, a))                     # now a backward op reads relu(h): it is handed
    st = stages(g)
    assert "mul" in st.recomputable and not stage_conflict(st, "mm_1", "mul")


def test_stage_round_trips_through_json():
    g = _joint_graph()
    again = P.Graph.from_json(g.to_json())
    assert again.nodes["dy"].attr("stage") == 1 and again.nodes["x"].attr("stage") is None
    with pytest.raises(P.PartitionError, match="stage"):
        P.Graph().input("z", (2,), "float32", stage=-1)
