"""The graph level has one record per ATen op, with every field filled, and its semantics
agree with the epilogue tree's (same erf, same GELU)."""
import dataclasses
import inspect

import numpy as np
import pytest

from evt_core import partition as P
from evt_core.partition.aten import ALIASES, REGISTRY, Kind, OpDef
from evt_core.tree.ops import ELEMENTWISE, Op

FIELDS = [f.name for f in dataclasses.fields(OpDef)]


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_every_op_has_every_field(name):
    d = REGISTRY[name]
    assert d.name == name and isinstance(d.kind, Kind) and d.sig
    assert callable(d.infer) and callable(d.impl)
    assert callable(d.tree) or (isinstance(d.tree, str) and d.tree), "tree: a rule or the reason there is none"
    assert isinstance(d.defaults, dict) and set(d.defaults) <= {p.rstrip(":") for p in d.sig}
    assert all(a not in REGISTRY for a in d.aliases)
    # The NumPy implementation takes the signature's parameters by name.
    assert set(d.tensor_params) <= set(inspect.signature(d.impl).parameters), name


def test_there_is_one_table():
    from evt_core.partition import optable
    assert optable.OPS is REGISTRY and set(FIELDS) >= {"kind", "sig", "infer", "impl", "tree"}
    assert ALIASES["softmax"] == "_softmax"
    import importlib.util
    assert importlib.util.find_spec("evt_core.partition.numpy_ops") is None
    assert importlib.util.find_spec("evt_core.partition.epilogue") is None


@pytest.mark.parametrize("op,approx", [(Op.GELU, "none"), (Op.GELU_TANH, "tanh")])
def test_gelu_is_the_trees_gelu(op, approx):
    x = np.linspace(-6, 6, 1001, dtype=np.float32)
    got = REGISTRY["gelu"].impl(x, approximate=approx)
    np.testing.assert_array_equal(got, ELEMENTWISE[op].fn(x))


def test_erf_is_the_trees_erf():
    import math
    x = np.linspace(-4, 4, 101, dtype=np.float32)
    want = np.array([math.erf(float(v)) for v in x], np.float32)
    np.testing.assert_array_equal(REGISTRY["erf"].impl(x), want)


def test_group_tree_builds_a_tree_without_source():
    g = P.Graph()
    x, w = g.input("x", (8, 16), "float16"), g.input("w", (16, 4), "float16")
    b = g.input("b", (4,), "float16")
    y = g.add("gelu", g.add("add", g.add("mm", x, w), b), approximate="tanh")
    g.output(y, g.add("sum", y, [1], True))
    plan = P.partition(g, cache=None)
    grp = next(grp for grp in plan.groups if "mm" in grp)
    gt = P.group_tree(g, grp, set(g.outputs) | {y.name})
    assert gt.inputs == {"in_0": "b"} and set(gt.outputs.values()) == {y.name, "sum"}
    from evt_core.tree.ir import Tree
    assert isinstance(gt.tree, Tree) and gt.tree.program is not None


def test_group_tree_equals_the_hand_written_epilogue():
    import evt_core
    from evt_core import ops
    g = P.Graph()
    x, w = g.input("x", (8, 16), "float16"), g.input("w", (16, 4), "float16")
    b = g.input("b", (4,), "float16")
    y = g.add("gelu", g.add("add", g.add("mm", x, w), b), approximate="tanh")
    s = g.add("sum", y, [1], True)
    g.output(y, s)
    gt = P.group_tree(g, ["mm", "add", "gelu", "sum"], {"gelu", "sum"})

    def epilogue(accum, in_0):
        y = ops.gelu_tanh(accum + in_0)
        return {"o0": y, "o1": ops.sum(y, over="N")}

    examples = {"accum": np.empty((8, 4), np.float32), "in_0": np.empty((4,), np.float16),
                "o0": np.empty((8, 4), np.float16), "o1": np.empty((8,), np.float16)}
    assert gt.tree == evt_core.trace(epilogue, examples)
    assert gt.outputs == {"o0": "gelu", "o1": "sum"} and gt.a == ("x", None) and gt.b == ("w", None)


@pytest.mark.parametrize("op,approx", [(Op.GELU_GRAD, "none"), (Op.GELU_TANH_GRAD, "tanh")])
def test_gelu_backward_is_grad_times_the_trees_derivative(op, approx):
    x = np.linspace(-6, 6, 1001, dtype=np.float32)
    grad = np.cos(x).astype(np.float32)
    got = REGISTRY["gelu_backward"].impl(grad, x, approximate=approx)
    np.testing.assert_array_equal(got, grad * ELEMENTWISE[op].fn(x))


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_erf_gelu_backward_lowers_to_a_tree_and_runs_fused(dt):
    """BERT's DGELU (dh = dy @ w^T, dz = gelu_backward(dh, z) in the erf form, db = dz column
    sums): one GEMM group whose tree uses gelu_grad, matching the unpartitioned NumPy graph.
    The tree is traced in the graph's dtypes: a bfloat16 graph gives bfloat16 loads and stores
    (tracing them as float32 made every bfloat16 training step's kernels refuse their inputs)."""
    from evt_core.tree.ir import Tree
    from helpers import assert_close, make_inputs
    g = P.Graph()
    dy, w = g.input("dy", (8, 16), dt), g.input("w", (4, 16), dt)
    z = g.input("z", (8, 4), dt)
    dz = g.add("gelu_backward", g.add("mm", dy, g.add("t", w)), z, approximate="none")
    g.output(dz, g.add("sum", dz, [0], True))
    plan = P.partition(g, cache=None)
    k, grp = next((k, grp) for k, grp in enumerate(plan.groups) if "mm" in grp)
    assert "gelu_backward" in grp
    gt = P.group_tree(g, grp, set(g.outputs))
    assert isinstance(gt.tree, Tree) and Op.GELU_GRAD in {ins.op for ins in gt.tree.program.instrs}
    prog = gt.tree.program
    assert {op.dtype for op in prog.inputs} == {dt} and prog.outputs[0].dtype == dt
    inputs = make_inputs(g)
    got, want = P.run(plan, inputs, backend="numpy"), P.evaluate(g, inputs)
    assert k in got.fused and not got.unfused
    for o in g.outputs:
        assert_close(got[o], want[o], tol=2e-3 if dt == "float16" else 1.6e-2, what=o)


@pytest.mark.parametrize("dims,fused", [([0, 1], True), ([0, 1, 2], True), ([1], False), ([2], False)])
def test_reduction_of_a_view_of_the_frame_lowers_to_problem_axes(dims, fused):
    """LayerNorm's backward sums a (B, S, H) view of the (B*S, H) accumulator over (B, S): in
    the frame that is a sum over M (or over M and N), so the group fuses and matches the
    unpartitioned graph. Reducing part of a frame axis (S alone), or N of a view whose result
    keeps the (B, S) split, stays unfused with the reason."""
    from helpers import assert_close, make_inputs
    g = P.Graph()
    x, w = g.input("x", (32, 8), "float16"), g.input("w", (8, 64), "float16")
    r = g.input("r", (2, 16, 64), "float16")
    y = g.add("add", g.add("view", g.add("mm", x, w), size=[2, 16, 64]), r)
    s = g.add("sum", g.add("mul", y, r), dims, False)
    g.output(y, s)
    plan = P.partition(g, cache=None)
    k, grp = next((k, grp) for k, grp in enumerate(plan.groups) if "mm" in grp)
    inputs = make_inputs(g)
    got, want = P.run(plan, inputs, backend="numpy"), P.evaluate(g, inputs)
    if "sum" not in grp:
        pytest.skip("the partitioner kept the sum out of the GEMM group")
    assert (k in got.fused) == fused, got.unfused
    if not fused:
        assert "rank-3 value in a rank-2 epilogue" in got.unfused[k]
    for o in g.outputs:
        assert_close(got[o], want[o], tol=2e-3, what=o)
