"""JSON describes the graph that was built: inputs with shape and dtype, ops under the names
they were built with, and `from_json` rebuilds an equal graph."""
import json
import random

import pytest

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES
from evt_core.partition.random_graphs import random_graph


def round_trip(g):
    text = g.to_json()
    g2 = P.Graph.from_json(text)
    assert g2 == g and g2.structure() == g.structure()
    assert g2.to_json() == text                      # a fixpoint: spellings survive
    return json.loads(text)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("passes", [False, True])
def test_examples_round_trip(name, passes):
    g = EXAMPLES[name]()
    round_trip(P.run_pipeline(g) if passes else g)


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_round_trip(seed):
    round_trip(random_graph(random.Random(seed), 40, p_multi=0.1))


def test_inputs_carry_shape_and_dtype_and_ops_their_built_names():
    g = P.Graph()
    x = g.input("x", (4, 8), "bfloat16")
    s = g.add("softmax", x, -1)
    t = g.add("to", s, "float32")
    o = g.add("my_op", t, shape=(4, 8), dtype="float32")
    g.output(o)
    doc = round_trip(g)
    nodes = {d["name"]: d for d in doc["nodes"]}
    assert nodes["x"]["shape"] == [4, 8] and nodes["x"]["dtype"] == "bfloat16"
    assert nodes[s.name]["op"] == "softmax" and g.nodes[s.name].op == "_softmax"
    assert nodes[t.name]["op"] == "to" and nodes[o.name]["op"] == "my_op"


def test_opaque_multi_output_keeps_its_types():
    from evt_core.partition.graph import Node
    from evt_core.partition.types import make_type
    g = P.Graph()
    x = g.input("x", (4, 8), "float32")
    n = g._insert(Node("lib", "lib_op", ("x",), ("arg0",), (("target", "lib.op"),),
                       (make_type((4, 8), "float32"), make_type((4,), "int64"))))
    g.output(g.add("getitem", n, 1), x)
    round_trip(g)


def test_version_1_documents_are_still_read():
    g = EXAMPLES["mlp_block"]()
    doc = json.loads(g.to_json())
    doc["format"] = "evt-partition-graph/1"
    for d in doc["nodes"]:
        if d["op"] == "input":
            d["types"] = [[d.pop("shape"), d.pop("dtype")]]
    assert P.Graph.from_json(json.dumps(doc)) == g
