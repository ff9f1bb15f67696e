"""Import a torch.fx graph (e.g. the joint forward/backward graph aot_autograd hands to a
partition_fn) as a partition Graph. Optional: needs PyTorch, which is imported lazily.

UNTESTED in this repository (torch is not installed in CI); written against the documented
torch.fx API: `graph.nodes`, `node.op` in {placeholder, call_function, get_attr, output},
OpOverload targets (`torch.ops.aten.mm.default`) with `.overloadpacket.__name__`, and shapes in
`node.meta["val"]` (FakeTensor) or `node.meta["tensor_meta"]`. Tests gate it with
`pytest.importorskip("torch")`."""
from __future__ import annotations

import operator

from .errors import check
from .graph import Graph, Node
from .optable import OPS

_DROP = {"detach", "alias", "lift_fresh_copy"}     # identities for partitioning (design doc 4.1)


def _op_name(target) -> str:
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    name = packet.__name__ if packet is not None else getattr(target, "__name__", str(target))
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _types(node):
    val = node.meta.get("val", node.meta.get("tensor_meta"))
    vals = val if isinstance(val, (tuple, list)) else [val]
    out = []
    for v in vals:
        if v is None or not hasattr(v, "shape"):
            continue
        out.append((tuple(int(s) for s in v.shape), str(v.dtype).replace("torch.", "")))
    return out


def from_fx(gm) -> Graph:
    """A Graph with one node per placeholder/get_attr (inputs) and call_function; outputs from
    the output node. Unknown ops become opaque nodes with the traced shape and dtype."""
    g, names = Graph(), {}

    def conv(a):
        if hasattr(a, "op") and hasattr(a, "meta"):
            return names[a.name]
        if isinstance(a, (list, tuple)):
            return type(a)(conv(x) for x in a)
        if hasattr(a, "is_floating_point") is False and type(a).__name__ == "dtype":
            return str(a).replace("torch.", "")
        return str(a).replace("torch.", "") if type(a).__name__ in ("dtype", "device", "layout") else a

    for node in gm.graph.nodes:
        if node.op in ("placeholder", "get_attr"):
            (shape, dtype), = _types(node)[:1] or [((), "float32")]
            names[node.name] = g.input(node.name, shape, dtype).name
        elif node.op == "call_function":
            op = _op_name(node.target)
            args, kwargs = [conv(a) for a in node.args], {k: conv(v) for k, v in node.kwargs.items()
                                                           if k not in ("device", "layout", "pin_memory",
                                                                        "memory_format")}
            if op in _DROP:
                names[node.name] = args[0]
                continue
            if op in OPS or op == "getitem" or op in ("softmax", "log_softmax", "_unsafe_view", "reshape"):
                names[node.name] = g.add(op, *args, name=node.name, **kwargs).name
            else:
                types = _types(node)
                check(bool(types), "fx-import", f"{op} has no shape metadata; run ShapeProp or use aot_autograd",
                      (node.name,))
                ins = [a for a in args if isinstance(a, str) and a in g.nodes]
                names[node.name] = g._insert(Node(node.name, op, tuple(ins), tuple(f"arg{i}" for i in range(len(ins)))),
                                             shape=types[0][0], dtype=types[0][1]).name
        elif node.op == "output":
            outs = node.args[0] if isinstance(node.args[0], (list, tuple)) else [node.args[0]]
            g.output(*[names[o.name] for o in outs if o is not None and hasattr(o, "name")])
    return g
