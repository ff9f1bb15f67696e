"""The graph's JSON form (format evt-partition-graph/2) and its reader.

Written: every input with its `shape` and `dtype`; every other node with the op name it was
built with (`softmax` stays `softmax`), its operands by parameter, its attributes and its
output types. Read: inputs are re-created, known ops are rebuilt through `Graph.add` (so
aliases, defaults and shape rules apply exactly as when the graph was built) and their
declared types must equal the inferred ones; opaque ops keep their declared types.
Invariant: `from_json(to_json(g)) == g` and the structures are equal. Every malformed document
raises PartitionError("json", ...) naming the node and the field; format /1 (types on inputs,
ATen names) is still read."""
from __future__ import annotations

import json

from .errors import PartitionError, check
from .optable import ALIASES, OPS
from .types import make_type

FORMAT = "evt-partition-graph/2"
_READABLE = (FORMAT, "evt-partition-graph/1")


def to_json(g, indent: int | None = 1) -> str:
    nodes = []
    for n in g.nodes.values():
        if n.op == "input":
            nodes.append({"name": n.name, "op": "input", "shape": list(n.shape), "dtype": n.dtype,
                          **({"stage": n.attr("stage")} if n.attr("stage") else {})})
            continue
        nodes.append({"name": n.name, "op": n.built_as, "inputs": list(n.inputs), "params": list(n.params),
                      "attrs": {k: v for k, v in n.attrs},
                      "types": [[list(t.shape), t.dtype] for t in n.types]})
    return json.dumps({"format": FORMAT, "nodes": nodes, "outputs": g.outputs}, indent=indent)


def _fail(message: str, who: str = "") -> None:
    raise PartitionError("json", message, (who,) if who else ())


def _field(d: dict, key: str, kind, who: str, default=None):
    if key not in d:
        if default is not None:
            return default
        _fail(f"node has no {key!r} field", who)
    v = d[key]
    check(isinstance(v, kind), "json", f"field {key!r} must be a {getattr(kind, '__name__', kind)}, "
          f"got {type(v).__name__}", (who,))
    return v


def from_json(cls, text):
    try:
        data = json.loads(text)
    except (TypeError, ValueError) as e:   # JSONDecodeError is a ValueError
        _fail(f"not a JSON document ({e}); pass the text Graph.to_json() wrote")
    check(isinstance(data, dict) and isinstance(data.get("nodes"), list), "json",
          "a graph document is an object with a 'nodes' list and an 'outputs' list")
    check(data.get("format", _READABLE[1]) in _READABLE, "json",
          f"unknown format {data.get('format')!r}; this reader takes {list(_READABLE)}")
    g = cls()
    for k, d in enumerate(data["nodes"]):
        check(isinstance(d, dict), "json", f"node #{k} is not an object")
        who = d.get("name") if isinstance(d.get("name"), str) else f"node #{k}"
        _field(d, "name", str, who)
        op = _field(d, "op", str, who)
        if op == "input":
            _input(g, d, who)
        else:
            _node(g, d, op, who)
    outputs = _field(data, "outputs", list, "outputs")
    for o in outputs:
        check(isinstance(o, str) and o in g.nodes, "json", f"output {o!r} is not a node of the document",
              (str(o),))
    g.output(*outputs)
    return g


def _types(d: dict, who: str):
    raw = _field(d, "types", list, who, default=[])
    out = []
    for t in raw:
        check(isinstance(t, list) and len(t) == 2, "json", f"a type is [shape, dtype], got {t!r}", (who,))
        out.append(make_type(t[0], t[1], who))
    return tuple(out)


def _input(g, d: dict, who: str) -> None:
    if "shape" in d or "dtype" in d:
        g.input(d["name"], _field(d, "shape", list, who), _field(d, "dtype", str, who),
                _field(d, "stage", int, who, default=0))
        return
    types = _types(d, who)     # format /1
    check(len(types) == 1, "json", "an input needs a shape and a dtype", (who,))
    g.input(d["name"], types[0].shape, types[0].dtype)


def _node(g, d: dict, op: str, who: str) -> None:
    from .graph import Node, freeze

    inputs = _field(d, "inputs", list, who, default=[])
    params = _field(d, "params", list, who, default=[f"arg{i}" for i in range(len(inputs))])
    attrs = _field(d, "attrs", dict, who, default={})
    check(len(params) == len(inputs), "json", "'params' and 'inputs' differ in length", (who,))
    for i in inputs:
        check(isinstance(i, str) and i in g.nodes, "json", f"operand {i!r} is not an earlier node", (who,))
    types = _types(d, who)
    name = d["name"]
    if ALIASES.get(op, op) in OPS:
        # Rebuilt as it was built: operands and attributes by parameter name.
        check(not set(params) & set(attrs), "json", "a parameter is both an operand and an attribute", (who,))
        node = g.add_bound(op, (), {**dict(zip(params, inputs)), **attrs}, name=name)
        check(not types or node.types == types, "json",
              f"declared types {[(t.shape, t.dtype) for t in types]} differ from the inferred "
              f"{[(t.shape, t.dtype) for t in node.types]}; fix the document or drop its 'types'", (who,))
        return
    check(bool(types), "json", f"opaque op {op!r} needs its output 'types'", (who,))
    g._insert(Node(name, op, tuple(inputs), tuple(params),
                   tuple(sorted((k, freeze(v)) for k, v in attrs.items())), types))
