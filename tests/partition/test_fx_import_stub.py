"""The fx importer on hand-built stand-ins of torch.fx nodes, so its mapping rules are tested
where torch is absent (CI). test_fx_import.py checks the same code on real aot_autograd graphs."""
import operator
from types import SimpleNamespace

import numpy as np
import pytest

from evt_core import partition as P
from evt_core.partition.fx_import import aten_name, from_fx, fx_output_positions


class _Overload:
    """Stands in for torch.ops.aten.NAME.OVERLOAD (an OpOverload)."""

    def __init__(self, name, overload="default"):
        self.overloadpacket = SimpleNamespace(__name__=name)
        self._str = f"aten.{name}.{overload}"

    def __str__(self):
        return self._str


class dtype:   # noqa: N801 - the importer recognises torch.dtype by its class name
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return f"torch.{self.name}"


class _Node:
    def __init__(self, name, op, target=None, args=(), kwargs=None, shape=None, dt="float32"):
        self.name, self.op, self.target, self.args, self.kwargs = name, op, target, args, kwargs or {}
        self.meta = {} if shape is None else {"val": SimpleNamespace(shape=shape, dtype=dtype(dt))}


def _module(nodes):
    return SimpleNamespace(graph=SimpleNamespace(nodes=nodes))


def _linear_gm(sum_shape=(1, 32)):
    x = _Node("primals_1", "placeholder", shape=(8, 16))
    w = _Node("primals_2", "placeholder", shape=(32, 16))
    b = _Node("primals_3", "placeholder", shape=(32,))
    t = _Node("t", "call_function", _Overload("t"), (w,), shape=(16, 32))
    mm = _Node("addmm", "call_function", _Overload("addmm"), (b, x, t), shape=(8, 32))
    det = _Node("detach", "call_function", _Overload("detach"), (mm,), shape=(8, 32))
    act = _Node("gelu", "call_function", _Overload("gelu"), (det,), {"approximate": "tanh"}, shape=(8, 32))
    add = _Node("add", "call_function", _Overload("add", "Tensor"), (act, mm), {"alpha": 2}, shape=(8, 32))
    red = _Node("sum_1", "call_function", _Overload("sum", "dim_IntList"), (add, [0], True),
                {"dtype": None}, shape=sum_shape)
    foo = _Node("foo", "call_function", _Overload("my_custom_op"), (add, dtype("float16")), shape=(8, 32))
    out = _Node("output", "output", "output", ([red, None, foo],))
    return _module([x, w, b, t, mm, det, act, add, red, foo, out])


def test_aten_ops_map_onto_the_op_table_and_unknown_ops_are_opaque():
    gm = _linear_gm()
    g = from_fx(gm)
    ops = {n.name: n.op for n in g.nodes.values()}
    assert ops["t"] == "t" and ops["addmm"] == "addmm" and ops["sum_1"] == "sum"
    assert "detach" not in ops                           # identities vanish
    assert g.nodes["gelu"].inputs == ("addmm",)          # ... and their users read the source
    assert g.nodes["sum_1"].attr("dim") == (0,) and g.nodes["sum_1"].attr("keepdim") is True
    foo = g.nodes["foo"]
    assert foo.kind is P.Kind.OPAQUE and foo.attr("target") == "aten.my_custom_op.default"
    assert foo.attr("spec")[0] == (("$tensor", 0), ("$dtype", "float16"))
    assert g.outputs == ["sum_1", "foo"] and fx_output_positions(gm) == [0, 2]


def test_alpha_is_explicit_and_values_match_numpy():
    g = from_fx(_linear_gm())
    rng = np.random.default_rng(0)
    inputs = {n: rng.standard_normal(g.nodes[n].shape).astype(np.float32)
              for n in ("primals_1", "primals_2", "primals_3")}
    got = P.evaluate(g, inputs, impls={"my_custom_op": lambda arg0, spec, target: arg0})
    z = inputs["primals_1"] @ inputs["primals_2"].T + inputs["primals_3"]
    gelu = 0.5 * z * (1 + np.tanh(0.7978845608028654 * (z + 0.044715 * z ** 3)))
    np.testing.assert_allclose(got["sum_1"], (gelu + 2 * z).sum(0, keepdims=True), rtol=1e-5, atol=1e-4)


def test_a_traced_type_the_mapping_disagrees_with_is_a_typed_error():
    with pytest.raises(P.PartitionError) as e:
        from_fx(_linear_gm(sum_shape=(32,)))
    assert e.value.rule == "fx-import" and e.value.nodes == ("sum_1",)


def test_opaque_node_without_metadata_names_the_node():
    x = _Node("x", "placeholder", shape=(4,))
    bad = _Node("weird", "call_function", _Overload("weird_op"), (x,))
    with pytest.raises(P.PartitionError) as e:
        from_fx(_module([x, bad, _Node("output", "output", "output", ([bad],))]))
    assert e.value.nodes == ("weird",) and "aot_autograd" in str(e.value)


def test_opaque_multi_output_nodes_survive_passes_and_json():
    x = _Node("x", "placeholder", shape=(4, 8))
    two = _Node("two", "call_function", _Overload("split_two"), (x,))
    two.meta["val"] = (SimpleNamespace(shape=(4, 4), dtype=dtype("float32")),) * 2
    a = _Node("getitem", "call_function", operator.getitem, (two, 1), shape=(4, 4))
    r = _Node("relu", "call_function", _Overload("relu"), (a,), shape=(4, 4))
    g = from_fx(_module([x, two, a, r, _Node("output", "output", "output", ([r],))]))
    assert len(g.nodes["two"].types) == 2
    g2 = P.run_pipeline(g)
    assert len(g2.nodes["two"].types) == 2
    assert P.Graph.from_json(g.to_json()) == g
    P.partition(g2).check()
    assert aten_name(operator.getitem) == "getitem"


def test_a_known_op_called_in_a_convention_the_table_lacks_becomes_opaque():
    x = _Node("x", "placeholder", shape=(4,))
    odd = _Overload("gelu", "odd")
    odd._overloadname = "odd"
    y = _Node("gelu", "call_function", odd, (x,), {"extra": 3}, shape=(4,))
    g = from_fx(_module([x, y, _Node("output", "output", "output", ([y],))]))
    assert g.nodes["gelu"].op == "gelu.odd" and g.nodes["gelu"].kind is P.Kind.OPAQUE
