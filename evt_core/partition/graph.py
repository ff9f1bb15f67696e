"""The training-graph IR: a DAG of named ATen-style nodes with static types.

A `Graph` is built front to back (`input`, `add`, `output`), so insertion order is a
topological order; passes build new graphs rather than editing one in place. Nodes are frozen
values: two nodes are equal when name, op, operands, attributes and types are equal, which is
what the Before/Expected pass tests compare."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterable

from .errors import PartitionError, check
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
    # The op name the caller wrote (e.g. "softmax" for _softmax); JSON writes it back. Not
    # part of equality: two nodes built as "softmax" and "_softmax" compute the same thing.
    spelling: str = field(default="", compare=False)

    @property
    def built_as(self) -> str:
        return self.spelling or self.op

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
        self._reserved: frozenset = frozenset()   # names fresh ones avoid (passes/rewrite.py)

    # ---- building -------------------------------------------------------------------------
    def input(self, name: str, shape, dtype: str = "float16", stage: int = 0) -> Node:
        """`stage`: when the value exists (rules.stages): 0, or 1 for a training graph's output
        gradients, which the backward reads and the forward never has."""
        check(isinstance(name, str) and name != "", "name", f"an input name must be a non-empty string, "
              f"got {name!r}", (str(name),))
        check(type(stage) is int and stage >= 0, "stage", f"an input's stage is an int >= 0, got {stage!r}",
              (name,))
        return self._insert(Node(name, "input", attrs=(("stage", stage),) if stage else (),
                                 types=(make_type(shape, dtype, name),)))

    def constant(self, value, shape=(), dtype: str | None = None, name: str | None = None) -> Node:
        check(type(value) in _SCALAR_DTYPE, "constant", f"a constant is a Python bool, int or float, got "
              f"{value!r}", (str(name or "constant"),))
        dtype = dtype or _SCALAR_DTYPE[type(value)]
        return self.add("full", tuple(shape), value, dtype, name=name or self._fresh("c"))

    def add(self, op: str, /, *args, name: str | None = None, shape=None, dtype=None, **attrs) -> Node:
        """Append `op(*args, **attrs)`. Node (or node-name) arguments are operands, Python
        scalars in operand positions become constants, everything else binds attributes in
        signature order. Unknown ops are opaque and need `shape=` and `dtype=`."""
        return self.add_bound(op, args, attrs, name=name, shape=shape, dtype=dtype)

    def add_bound(self, op: str, args=(), attrs=None, name: str | None = None, shape=None, dtype=None) -> Node:
        """`add` with the keyword arguments as a dict, so that parameters named like `add`'s
        own keywords (`_to_copy`'s `dtype`, `self`) can be bound by name (the JSON reader)."""
        attrs = dict(attrs or {})
        who = str(name or op)
        check(isinstance(op, str) and op != "", "op", f"op must be a non-empty string, got {op!r}", (who,))
        check(op != "input", "op",
              "graph inputs are made with g.input(name, shape, dtype), not g.add('input')", (who,))
        spelling, op = op, ALIASES.get(op, op)
        check(name is None or (isinstance(name, str) and name != ""), "name",
              f"a node name must be a non-empty string, got {name!r}", (str(name),))
        name = name or self._fresh(op.lstrip("_"))
        info = OPS.get(op)
        if info is None:  # opaque: positional node arguments are operands, keywords attributes
            inputs = [self._ref(v, name) for v in args]
            params, attr = [f"arg{i}" for i in range(len(args))], dict(attrs)
        else:
            inputs, params, attr = self._bind(op, info, name, args, attrs)
        node = Node(name, op, tuple(inputs), tuple(params),
                    tuple(sorted((k, freeze(v)) for k, v in attr.items())), spelling=spelling)
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
            check(isinstance(v, (Node, str)), "output", f"outputs are nodes or node names, got {v!r}", ())
            self.outputs.append(self._ref(v, "output"))

    # ---- queries --------------------------------------------------------------------------
    def users(self) -> dict[str, list[str]]:
        out = {n: [] for n in self.nodes}
        for node in self.nodes.values():
            for i in dict.fromkeys(node.inputs):
                out[i].append(node.name)
        return out

    def reads(self, u: str, v: str) -> tuple[int, ...]:
        """Indices of u's outputs that v reads: getitem reads its index, any other operand
        slot output 0 (what shape inference and evaluation give it), however many slots."""
        cons = self.nodes[v]
        if cons.op == "getitem":
            return (cons.attr("index") % len(self.nodes[u].types),)
        return (0,) if u in cons.inputs else ()

    def edge_bytes(self, u: str, v: str) -> int:
        """Bytes moved on edge u->v: the tensors v actually reads from u (one output of a
        tuple op, however addressed). The one edge weight of the cost, every solver, every
        bound and the cache (all read it through `problem.make_problem` or `plan_cost`)."""
        types = self.nodes[u].types
        return sum(types[i].nbytes for i in self.reads(u, v))

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
            node = replace(node, types=self._infer(node, shape, dtype))
        self.nodes[node.name] = node
        self._count[node.name] = self._count.get(node.name, 0)
        return node

    def _infer(self, node: Node, shape, dtype) -> tuple[TensorType, ...]:
        if node.op == "getitem":
            types = self.nodes[node.inputs[0]].types
            i = node.attr("index")
            check(isinstance(i, int) and not isinstance(i, bool) and -len(types) <= i < len(types), "getitem",
                  f"index {i!r} of the {len(types)}-output op {node.inputs[0]!r}; use 0..{len(types) - 1}",
                  (node.name,))
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
        try:
            return info.infer(types, dict(node.attrs))
        except PartitionError as e:   # shape rules know operands, not nodes: name this one
            if e.nodes and e.nodes != ("?",):
                raise
            operands = ", ".join(f"{p}={i} {self.nodes[i].types[0].shape}" for p, i in zip(node.params, node.inputs))
            raise PartitionError(e.rule, f"{node.op}({operands}): {e.message}", (node.name,)) from None

    def _ref(self, v, who: str) -> str:
        name = v.name if isinstance(v, Node) else v
        check(isinstance(name, str) and name in self.nodes, "unknown-operand",
              f"{name!r} is not a node of this graph", (who, str(name)))
        return name

    def validate(self) -> None:
        """The invariants every consumer of a graph relies on, for graphs whose `nodes` or
        `outputs` were edited directly: operands are earlier nodes (so the graph is acyclic),
        every node has types, every output is a node. O(nodes + edges)."""
        seen = set()
        for name, n in self.nodes.items():
            for i in n.inputs:
                check(i in seen, "cycle" if i == name or i in self.nodes else "unknown-operand",
                      f"operand {i!r} is not an earlier node (a cycle, a self-read or a typo)", (name, i))
            check(bool(n.types), "types", "the node has no output types", (name,))
            seen.add(name)
        for o in self.outputs:
            check(o in self.nodes, "unknown-output", f"output {o!r} is not a node of this graph; "
                  "name an existing node in g.output(...)", (str(o),))

    def _fresh(self, base: str) -> str:
        k = self._count.get(base, -1) + 1
        while (cand := base if k == 0 else f"{base}_{k}") in self.nodes or cand in self._reserved:
            k += 1
        self._count[base] = k
        return cand

    # ---- JSON (graph_json.py) ------------------------------------------------------------
    def to_json(self, indent: int | None = 1) -> str:
        from .graph_json import to_json
        return to_json(self, indent)

    @classmethod
    def from_json(cls, text: str) -> "Graph":
        from .graph_json import from_json
        return from_json(cls, text)

    @classmethod
    def build(cls, nodes: Iterable[Node], outputs: Iterable[str]) -> "Graph":
        """A graph from already-typed nodes in topological order (the passes' constructor).
        Invariant checked: names are unique, every operand is an earlier node (so no node
        reads itself and there is no cycle), every node has types and every output exists."""
        g = cls()
        for n in nodes:
            check(isinstance(n, Node), "build", f"Graph.build takes Nodes, got {type(n).__name__}", ())
            check(n.name not in g.nodes, "duplicate-name", f"a node named {n.name!r} exists", (n.name,))
            for i in n.inputs:
                check(i != n.name, "cycle", "the node reads itself; a graph must be acyclic", (n.name,))
                check(i in g.nodes, "unknown-operand", f"operand {i!r} is not an earlier node; give the "
                      "nodes in topological order (a later operand means a cycle or a typo)", (n.name, i))
            check(len(n.params) == len(n.inputs), "build", "one parameter name per operand", (n.name,))
            check(bool(n.types), "build", "the node has no output types", (n.name,))
            g.nodes[n.name] = n
        g.output(*outputs)
        return g
