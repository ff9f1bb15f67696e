import numpy as np
import pytest

from evt_core import partition as P


def test_contract_example():
    g = P.Graph()
    x = g.input("x", (8192, 768), "float16"); w = g.input("w", (768, 3072), "float16")
    b = g.input("b", (3072,), "float16")
    h = g.add("mm", x, w); z = g.add("add", h, b); y = g.add("gelu", z, approximate="tanh")
    g.output(y, z)
    plan = P.partition(g)
    assert plan.groups == [["mm", "add", "gelu"]]
    assert plan.cost == 0 and plan.optimal
    plan.check()
    assert P.Graph.from_json(g.to_json()) == g


@pytest.mark.parametrize("op,args,kw,shape", [
    ("mm", [(4, 3), (3, 5)], {}, (4, 5)),
    ("bmm", [(2, 4, 3), (2, 3, 5)], {}, (2, 4, 5)),
    ("add", [(4, 5), (5,)], {}, (4, 5)),
    ("mul", [(4, 1), (1, 5)], {}, (4, 5)),
    ("sum", [(4, 5)], {"dim": [1], "keepdim": True}, (4, 1)),
    ("amax", [(2, 4, 5)], {"dim": 0}, (4, 5)),
    ("mean", [(4, 5)], {}, ()),
    ("permute", [(2, 3, 4)], {"dims": (2, 0, 1)}, (4, 2, 3)),
    ("view", [(2, 3, 4)], {"size": (6, -1)}, (6, 4)),
    ("transpose", [(2, 3, 4)], {"dim0": 0, "dim1": 2}, (4, 3, 2)),
    ("softmax", [(4, 5)], {"dim": -1}, (4, 5)),
])
def test_shape_inference(op, args, kw, shape):
    g = P.Graph()
    ins = [g.input(f"i{k}", s, "float16") for k, s in enumerate(args)]
    assert g.add(op, *ins, **kw).shape == shape


def test_multi_output_and_edge_bytes():
    g = P.Graph()
    x = g.input("x", (8, 16), "float16")
    ln = g.add("layer_norm", x, [16], None, None, 1e-5)
    out, mean = g.add("getitem", ln, 0), g.add("getitem", ln, 1)
    assert mean.shape == (8, 1) and mean.dtype == "float32"
    assert g.edge_bytes(ln.name, out.name) == 8 * 16 * 2
    assert g.edge_bytes(ln.name, mean.name) == 8 * 4


def test_unknown_op_needs_a_type():
    g = P.Graph()
    x = g.input("x", (4, 4), "float16")
    with pytest.raises(P.PartitionError, match="unknown-op"):
        g.add("my_kernel", x)
    node = g.add("my_kernel", x, shape=(4, 4), dtype="float16")
    assert node.kind is P.Kind.OPAQUE


def test_bad_shapes_name_the_node():
    g = P.Graph()
    a, b = g.input("a", (4, 3), "float16"), g.input("b", (4, 3), "float16")
    with pytest.raises(P.PartitionError, match="mm of"):
        g.add("mm", a, b, name="bad")


def test_evaluate_reference():
    g = P.Graph()
    x = g.input("x", (3, 4), "float32")
    y = g.add("softmax", x, -1)
    g.output(g.add("sum", y, [1]))
    out = P.evaluate(g, {"x": np.arange(12.0).reshape(3, 4)})
    np.testing.assert_allclose(out["sum"], 1.0, rtol=1e-6)
