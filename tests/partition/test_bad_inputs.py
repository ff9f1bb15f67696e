"""Every bad input to the partitioner is refused with a typed PartitionError (an EvtError)
that names the culprit. One row per case: a name, a callable that builds and submits the bad
input, the expected error type and a fragment of the message naming the culprit."""
import json

import numpy as np
import pytest

from evt_core.errors import EvtError
from evt_core import partition as P
from evt_core.partition.graph import Node
from evt_core.partition.types import make_type

E = P.PartitionError
F16 = make_type((4, 4), "float16")


def base():
    """x (4, 4) -> relu -> mm(., w) : a small valid graph the rows spoil."""
    g = P.Graph()
    x, w = g.input("x", (4, 4), "float16"), g.input("w", (4, 4), "float16")
    g.output(g.add("mm", g.add("relu", x), w))
    return g


def add_to(op, *args, **kw):
    """g.add(op, *args) on a graph with inputs x (4, 4) f16, v (3,) f16 and i (4,) int64."""
    def build():
        g = P.Graph()
        g.input("x", (4, 4), "float16"), g.input("v", (3,), "float16"), g.input("i", (4,), "int64")
        return g.add(op, *args, **kw)
    return build


def built(nodes, outputs):
    return lambda: P.Graph.build([Node("x", "input", types=(F16,))] + nodes, outputs)


def doc(mutate):
    def build():
        d = json.loads(base().to_json())
        mutate(d)
        return P.Graph.from_json(json.dumps(d))
    return build


def plan_of(g=None):
    return P.partition(g or base(), cache=None)


def inputs(**over):
    r = {"x": np.ones((4, 4), np.float16), "w": np.ones((4, 4), np.float16)}
    r.update(over)
    return {k: v for k, v in r.items() if v is not None}


def edited_outputs():
    g = base()
    g.outputs.append("ghost")
    return g


def edited_self_read():
    g = base()
    g.nodes["relu"] = Node("relu", "relu", ("relu",), ("self",), (), (F16,))
    return g


CASES = [
    # ---- graphs --------------------------------------------------------------------------
    ("node reads itself (build)", built([Node("a", "relu", ("a",), ("self",), (), (F16,))], ["a"]), E,
     "acyclic [nodes: a]"),
    ("2-cycle (build)", built([Node("a", "add", ("x", "b"), ("self", "other"), (), (F16,)),
                               Node("b", "relu", ("a",), ("self",), (), (F16,))], ["b"]), E, "'b'"),
    ("output names no node (build)", built([Node("a", "relu", ("x",), ("self",), (), (F16,))], ["nope"]), E, "nope"),
    ("node without types (build)", built([Node("a", "relu", ("x",), ("self",))], ["a"]), E, "a"),
    ("not a Node (build)", lambda: P.Graph.build([{"name": "x"}], []), E, "dict"),
    ("duplicate name (build)", built([Node("x", "relu", (), (), (), (F16,))], ["x"]), E, "'x'"),
    ("output edited to a ghost, partition", lambda: P.partition(edited_outputs()), E, "ghost"),
    ("node edited to read itself, partition", lambda: P.partition(edited_self_read()), E, "relu"),
    ("output of unknown name", lambda: base().output("zz"), E, "zz"),
    ("output of a number", lambda: base().output(3), E, "3"),
    ("duplicate input", lambda: base().input("x", (2,)), E, "'x'"),
    ("add of an unknown operand", lambda: base().add("relu", "nowhere"), E, "nowhere"),
    ("add('input')", lambda: base().add("input"), E, "g.input"),
    ("op that is not a string", lambda: base().add(7, "x"), E, "got 7"),
    ("opaque op without a type", lambda: base().add("my_kernel", "x"), E, "my_kernel"),
    # ---- ops and attributes --------------------------------------------------------------
    ("gelu approximate=cubic", add_to("gelu", "x", approximate="cubic"), E, "cubic"),
    ("gelu_backward approximate=cubic", add_to("gelu_backward", "x", "x", approximate="cubic"), E, "cubic"),
    ("unknown attribute", add_to("sum", "x", axis=1), E, "axis"),
    ("too many arguments", add_to("relu", "x", 1, 2), E, "relu takes 1"),
    ("operand neither node nor number", add_to("add", "x", "nowhere"), E, "nowhere"),
    ("getitem past the outputs", lambda: _getitem(3), E, "index 3"),
    ("getitem with a float index", lambda: _getitem(1.5), E, "1.5"),
    ("constant of a string", lambda: base().constant("one"), E, "one"),
    # ---- shapes --------------------------------------------------------------------------
    ("mm inner dims", add_to("mm", "x", "v"), E, "mm of"),
    ("add does not broadcast", add_to("add", "x", "v"), E, "(3,)"),
    ("sum dim out of range", add_to("sum", "x", [5]), E, "dim 5"),
    ("softmax dim out of range", add_to("softmax", "x", 3), E, "dim 3"),
    ("permute dims", add_to("permute", "x", (0, 0)), E, "permute dims"),
    ("transpose dim", add_to("transpose", "x", 0, 9), E, "dim 9"),
    ("view size", add_to("view", "x", (5, 5)), E, "(5, 5)"),
    ("t of rank 3", lambda: _rank3("t"), E, "t() needs rank"),
    ("select index", add_to("select", "x", 0, 7), E, "select index 7"),
    ("one_hot without classes", lambda: _int_op("one_hot"), E, "num_classes"),
    ("layer_norm normalized_shape", add_to("layer_norm", "x", [5], None, None, 1e-5), E, "normalized_shape (5,)"),
    ("expand to a smaller shape", add_to("expand", "x", (2, 4)), E, "broadcast"),
    ("input with a negative extent", lambda: P.Graph().input("x", (4, -1)), E, "negative"),
    ("input shape not a tuple", lambda: P.Graph().input("x", "44"), E, "'44'"),
    ("input with an empty name", lambda: P.Graph().input("", (4,)), E, "name"),
    # ---- dtypes --------------------------------------------------------------------------
    ("input dtype", lambda: P.Graph().input("x", (4,), "float8"), E, "float8"),
    ("cast to an unknown dtype", add_to("to", "x", "float8"), E, "float8"),
    ("opaque op of unknown dtype", lambda: base().add("k", "x", shape=(4,), dtype="int3"), E, "int3"),
    ("full of unknown dtype", lambda: P.Graph().add("full", (4,), 1.0, "half"), E, "half"),
    # ---- JSON ----------------------------------------------------------------------------
    ("not JSON", lambda: P.Graph.from_json("{nodes: ["), E, "not a JSON document"),
    ("JSON not an object", lambda: P.Graph.from_json("[1, 2]"), E, "'nodes' list"),
    ("node without op", doc(lambda d: d["nodes"][2].pop("op")), E, "'op'"),
    ("node without name", doc(lambda d: d["nodes"][2].pop("name")), E, "node #2"),
    ("unknown format", doc(lambda d: d.update(format="onnx")), E, "onnx"),
    ("declared types differ from inferred", doc(lambda d: d["nodes"][2].update(types=[[[4, 4], "float32"]])),
     E, "declared types"),
    ("operand not an earlier node", doc(lambda d: d["nodes"][2].update(inputs=["mm"])), E, "'mm'"),
    ("output not in the document", doc(lambda d: d.update(outputs=["gone"])), E, "gone"),
    ("input without dtype", doc(lambda d: d["nodes"][0].pop("dtype")), E, "'dtype'"),
    ("opaque op without types", doc(lambda d: d["nodes"][2].update(op="lib_op", types=[])), E, "lib_op"),
    ("attrs not an object", doc(lambda d: d["nodes"][2].update(attrs=[1])), E, "'attrs'"),
    # ---- solver options ------------------------------------------------------------------
    ("partition(dict)", lambda: P.partition({"nodes": []}), E, "dict"),
    ("unknown solver", lambda: P.partition(base(), solver="cplex"), E, "cplex"),
    ("negative time limit", lambda: P.partition(base(), time_limit=-1), E, "time_limit"),
    ("time limit as text", lambda: P.partition(base(), time_limit="10s"), E, "10s"),
    ("cache of the wrong type", lambda: P.partition(base(), cache={}), E, "cache"),
    ("brute force too large", lambda: P.exhaustive_optimum(_chain(12)), E, "12 compute nodes"),
    ("plan naming a ghost node", lambda: P.check_plan(base(), [["relu"], ["mm"], ["ghost"]]), E, "ghost"),
    # ---- P.run / P.evaluate inputs -------------------------------------------------------
    ("run with a missing input", lambda: P.run(plan_of(), inputs(w=None)), E, "w"),
    ("run with a wrong shape", lambda: P.run(plan_of(), inputs(x=np.ones((2, 2)))), E, "x"),
    ("run with a graph, not a plan", lambda: P.run(base(), inputs()), E, "Graph"),
    ("run with inputs as a list", lambda: P.run(plan_of(), [1, 2]), E, "list"),
    ("run with an unknown backend", lambda: P.run(plan_of(), inputs(), backend="tpu"), E, "tpu"),
    ("evaluate with a missing input", lambda: P.evaluate(base(), inputs(x=None)), E, "x"),
    ("evaluate an edited graph", lambda: P.evaluate(edited_outputs(), inputs()), E, "ghost"),
    ("evaluate an opaque op without impl", lambda: P.evaluate(_opaque(), inputs()), E, "impls"),
]


def _getitem(index):
    g = base()
    return g.add("getitem", g.add("layer_norm", "x", [4], None, None, 1e-5), index)


def _rank3(op):
    g = P.Graph()
    return g.add(op, g.input("x", (2, 3, 4)))


def _int_op(op):
    g = P.Graph()
    return g.add(op, g.input("t", (4,), "int64"))


def _chain(n):
    g = P.Graph()
    v = g.input("x", (4,))
    for _ in range(n):
        v = g.add("relu", v)
    g.output(v)
    return g


def _opaque():
    g = base()
    g.output(g.add("lib", "x", shape=(4, 4), dtype="float16"))
    return g


def test_the_table_is_large_enough():
    assert len(CASES) >= 40 and len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("name,build,error,fragment", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_by_name(name, build, error, fragment):
    with pytest.raises(error) as info:
        build()
    assert isinstance(info.value, EvtError)
    assert fragment in str(info.value), str(info.value)
