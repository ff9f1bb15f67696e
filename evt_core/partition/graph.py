"""The training-graph IR: a DAG of named ATen-style nodes with static types.

A `Graph` is built front to back (`input`, `add`, `output`), so insertion order is a
topological order; passes build new graphs rather than editing one in place. Nodes are frozen
values: two nodes are equal when name, op, operands, attributes and types are equal, which is
what the Before/Expected pass tests compare."""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from .errors import check
from .optable import ALIASES, DEFAULTS, OPS, Kind, kind_of
from .types import TensorType, make_type

_SCALAR_DTYPE = {bool: "bool", int: "int64", float: "float32"}


def freeze(value):
    """Attributes are stored hashable: lists become tuples, recursively."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...] = ()
    params: tuple[str, ...] = ()     # the signature parameter each input binds
    attrs: tuple[tuple[str, Any], ...] = ()
    types: tuple[TensorType, ...] = ()

    @property
    def kind(self) -> Kind:
        return kind_of(self.op)

    @property
    def shape(self) -> tuple[int, ...]:
        return self.types[0].shape

    @property
    def dtype(self) -> str:
        return self.types[0].dtype

    def attr(self, key: str, default=None):
        return dict(self.attrs).get(key, default)

    def arg(self, param: str) -> str | None:
        """The input bound to signature parameter `param`, or None."""
        return dict(zip(self.params, self.inputs)).get(param)


class Graph:
    """Builder and container. `nodes` is ordered topologically; `outputs` lists result names."""

    def __init__(self):
        self.nodes: dict[str, Node] = {}
        self.outputs: list[str] = []
        self._count: dict[str, int] = {}

    # ---- building -------------------------------------------------------------------------
    def input(self, name: str, shape, dtype: str = "float16") -> Node:
        return self._insert(Node(name, "input", types=(make_type(shape, dtype, name),)))

    def constant(self, value, shape=(), dtype: str | None = None, name: str | None = None) -> Node:
        dtype = dtype or _SCALAR_DTYPE[type(value)]
        return self.add("full", tuple(shape), value, dtype, name=name or self._fresh("c"))

    def add(self, op: str, *args, name: str | None = None, shape=None, dtype=None, **attrs) -> Node:
        """Append `op(*args, **attrs)`. Node (or node-name) arguments are operands, Python
        scalars in operand positions become constants, everything else binds attributes in
        signature order. Unknown ops are opaque and need `shape=` and `dtype=`."""
        op = ALIASES.get(op, op)
        name = name or self._fresh(op.lstrip("_"))
        info = OPS.get(op)
        if info is None:  # opaque: positional node arguments are operands, keywords attributes
            inputs = [self._ref(v, name) for v in args]
            params, attr = [f"arg{i}" for i in range(len(args))], dict(attrs)
        else:
            inputs, params, attr = self._bind(op, info, name, args, attrs)
        node = Node(name, op, tuple(inputs), tuple(params), tuple(sorted((k, freeze(v)) for k, v in attr.items())))
        return self._insert(node, shape=shape, dtype=dtype)

    def _bind(self, op, info, name, args, attrs):
        keys = [p.rstrip(":") for p in info.sig]
        check(len(args) <= len(keys), "signature", f"{op} takes {len(keys)} arguments, got {len(args)}", (name,))
        unknown = set(attrs) - set(keys)
        check(not unknown, "signature", f"{op} has no parameter(s) {sorted(unknown)}; signature: {keys}", (name,))
        bound = {**DEFAULTS.get(op, {}), **dict(zip(keys, args)), **attrs}
        inputs, params, attr = [], [], {}
        for p, key in zip(info.sig, keys):
            if key not in bound:
                continue
            v = bound[key]
            if p.endswith(":") or v is None:   # an attribute, or an absent optional operand
                attr[key] = v
            elif isinstance(v, Node) or (isinstance(v, str) and v in self.nodes):
                inputs.append(self._ref(v, name)); params.append(key)
            else:
                check(isinstance(v, (bool, int, float)), "signature",
                      f"operand {key!r} of {op} must be a node or a Python scalar, got {v!r}", (name,))
                inputs.append(self.constant(v).name); params.append(key)
        return inputs, params, attr

    def output(self, *values) -> None:
        for v in values:
            self.outputs.append(self._ref(v, "output"))

    # ---- queries --------------------------------------------------------------------------
    def users(self) -> dict[str, list[str]]:
        out = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for i in dict.fromkeys(node.inputs):
                out[i].append(node.name)
        return out

    def edge_bytes(self, u: str, v: str) -> int:
        """Bytes moved on edge u->v: the tensor v reads from u (one output of a tuple op)."""
        prod, cons = self.nodes[u], self.nodes[v]
        if cons.op == "getitem":
            return prod.types[cons.attr("index")].nbytes
        return sum(t.nbytes for t in prod.types)

    def compute_nodes(self) -> list[str]:
        """Nodes that the partitioner places in groups (everything but inputs and constants)."""
        return [n for n, node in self.nodes.items() if node.kind not in (Kind.INPUT, Kind.CONST)]

    def structure(self) -> tuple:
        """The outputs as nested (op, attrs, types, operands) terms, inputs by name: equal for
        graphs that compute the same thing however their nodes are named (pass tests)."""
        memo: dict[str, tuple] = {}
        for n, node in self.nodes.items():
            memo[n] = ("input", n, node.types) if node.op == "input" else \
                (node.op, node.attrs, node.types, tuple(zip(node.params, (memo[i] for i in node.inputs))))
        return tuple(memo[o] for o in self.outputs)

    def __len__(self) -> int:
        return len(self.nodes)

    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and list(self.nodes.values()) == list(other.nodes.values()) \
            and self.outputs == other.outputs

    def __repr__(self) -> str:
        lines = [f"  {n.name} = {n.op}({', '.join(n.inputs)}{''.join(f', {k}={v!r}' for k, v in n.attrs)})"
                 f" : {' '.join(f'{t.dtype}{list(t.shape)}' for t in n.types)}" for n in self.nodes.values()]
        return "Graph(\n" + "\n".join(lines) + f"\n  outputs: {self.outputs}\n)"

    # ---- raw insertion, used by passes ----------------------------------------------------
    def insert(self, node: Node) -> Node:
        """Insert a node whose operands exist, (re)inferring its types."""
        return self._insert(node)

    def _insert(self, node: Node, shape=None, dtype=None) -> Node:
        check(node.name not in self.nodes, "duplicate-name", f"a node named {node.name!r} exists", (node.name,))
        for i in node.inputs:
            check(i in self.nodes, "unknown-operand", f"operand {i!r} is not a node of this graph", (node.name,))
        if node.op != "input":
            node = Node(node.name, node.op, node.inputs, node.params, node.attrs, self._infer(node, shape, dtype))
        self.nodes[node.name] = node
        self._count[node.name] = self._count.get(node.name, 0)
        return node

    def _infer(self, node: Node, shape, dtype) -> tuple[TensorType, ...]:
        if node.op == "getitem":
            types = self.nodes[node.inputs[0]].types
            i = node.attr("index")
            check(0 <= i < len(types), "getitem", f"index {i} of a {len(types)}-output op", (node.name,))
            return (types[i],)
        info = OPS.get(node.op)
        if info is None and shape is None and node.types:
            return node.types   # an opaque node declared with all its output types (fx import)
        if info is None:
            check(shape is not None and dtype is not None, "unknown-op",
                  f"op {node.op!r} is not in the op table; pass shape= and dtype= to add it as an opaque node",
                  (node.name,))
            return (make_type(shape, dtype, node.name),)
        types = {p: self.nodes[i].types[0] for p, i in zip(node.params, node.inputs)}
        return info.infer(types, dict(node.attrs))

    def _ref(self, v, who: str) -> str:
        name = v.name if isinstance(v, Node) else v
        check(name in self.nodes, "unknown-operand", f"{name!r} is not a node of this graph", (who,))
        return name

    def _fresh(self, base: str) -> str:
        k = self._count.get(base, -1) + 1
        while (cand := base if k == 0 else f"{base}_{k}") in self.nodes:
            k += 1
        self._count[base] = k
        return cand

    # ---- JSON -----------------------------------------------------------------------------
    def to_json(self, indent: int | None = 1) -> str:
        nodes = [{"name": n.name, "op": n.op, "inputs": list(n.inputs), "params": list(n.params),
                  "attrs": {k: v for k, v in n.attrs},
                  "types": [[list(t.shape), t.dtype] for t in n.types]} for n in self.nodes.values()]
        return json.dumps({"format": "evt-partition-graph/1", "nodes": nodes, "outputs": self.outputs},
                          indent=indent)

    @classmethod
    def from_json(cls, text: str) -> "Graph":
        data = json.loads(text)
        g = cls()
        for d in data["nodes"]:
            types = tuple(make_type(s, t, d["name"]) for s, t in d.get("types", ()))
            node = Node(d["name"], d["op"], tuple(d.get("inputs", ())), tuple(d.get("params", ())),
                        tuple(sorted((k, freeze(v)) for k, v in d.get("attrs", {}).items())), types)
            if node.op == "input" or (node.op not in OPS and len(types) > 1):
                g._insert(node)
            else:
                g._insert(node, shape=types[0].shape if types else None,
                          dtype=types[0].dtype if types else None)
        g.outputs = list(data["outputs"])
        return g

    @classmethod
    def build(cls, nodes: Iterable[Node], outputs: Iterable[str]) -> "Graph":
        """A graph from already-typed nodes in topological order (the passes' constructor)."""
        g = cls()
        for n in nodes:
            g.nodes[n.name] = n
        g.outputs = list(outputs)
        return g
