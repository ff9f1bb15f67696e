"""Import a torch.fx graph of ATen ops (the joint forward+backward graph aot_autograd hands to a
partition_fn, see `fx_capture.py`) as a partition Graph. Needs no torch import itself: it reads
the documented torch.fx surface (`graph.nodes`, `node.op/target/args/kwargs/meta`) and
`OpOverload.overloadpacket.__name__`, so torch-free code can import this module.

Mapping (invariant: every imported node computes what the ATen node computed, on the types
torch traced; `_check_types` enforces the types part):
* ATen ops whose packet name is in the op table map 1:1 (`aten.mm.default` -> `mm`,
  `aten.sum.dim_IntList` -> `sum`, ...); `_unsafe_view`/`reshape` -> `view`, `_safe_softmax` ->
  `_softmax`; `detach`/`alias`/`lift_fresh_copy` are identities and vanish.
* ATen calling conventions the op table does not share are rewritten in `_SPECIAL` (alpha of
  add/sub, dtype of reductions, the two outputs of nll_loss_forward, ...).
* Anything else becomes an opaque node (a group of its own) with the traced output types; its
  call is kept in attributes `target` and `spec` so `fx_capture.torch_impls` can evaluate it."""
from __future__ import annotations

import operator
from dataclasses import dataclass, field

from .errors import PartitionError, check
from .graph import Graph, Node
from .optable import ALIASES, OPS
from .types import make_type

_IDENTITY = frozenset({"detach", "alias", "lift_fresh_copy"})   # no data movement (design doc 4.1)
_IGNORED_KWARGS = frozenset({"device", "layout", "pin_memory", "memory_format", "non_blocking",
                             "implicit"})
_TENSOR, _DTYPE, _DEVICE, _MISC = "$tensor", "$dtype", "$device", "$repr"   # markers in `spec`


def aten_name(target) -> str:
    """`aten.mm.default` -> "mm"; operator.getitem -> "getitem"; in-place `add_` -> "add"."""
    if target is operator.getitem:
        return "getitem"
    packet = getattr(target, "overloadpacket", None)
    name = packet.__name__ if packet is not None else getattr(target, "__name__", str(target))
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _scalar(a):
    """torch.dtype -> "float32", other torch scalars (device, memory format) -> their str."""
    kind = type(a).__name__
    if kind == "dtype":
        return str(a).replace("torch.", "")
    if kind in ("device", "layout", "memory_format"):
        return str(a)
    return a


def _fx_types(node) -> list:
    """[(shape, dtype) or None] for each output torch traced (FakeTensor in meta["val"])."""
    val = node.meta.get("val", node.meta.get("tensor_meta"))
    vals = val if isinstance(val, (tuple, list)) else [val]
    return [(tuple(int(s) for s in v.shape), _scalar(v.dtype)) if hasattr(v, "shape") else None
            for v in vals]


@dataclass
class _TupleValue:
    """An ATen tuple output the IR models differently: index -> IR name, or a function
    (fx name of the getitem) -> IR name that builds the part on its first getitem, so parts
    nobody reads add no nodes. Builders name their last node `imp.fresh(fx name)` only after
    making their helpers, whose generated names might otherwise take it."""
    parts: dict = field(default_factory=dict)


class _Importer:
    def __init__(self, gm):
        self.gm, self.g, self.env = gm, Graph(), {}

    # ---- values ---------------------------------------------------------------------------
    def value(self, a):
        """An fx argument as an IR operand: nodes by IR name, containers recursively."""
        if hasattr(a, "op") and hasattr(a, "meta"):
            v = self.env[a.name]
            check(not isinstance(v, _TupleValue), "fx-import",
                  f"{a.name} is a tuple; read it through getitem", (a.name,))
            return v
        if isinstance(a, (list, tuple)):
            return tuple(self.value(x) for x in a)
        return _scalar(a)

    def fresh(self, fx_name: str) -> str:
        # fx names are unique, but constants the IR made may already use one (c, c_1, ...).
        return fx_name if fx_name not in self.g.nodes else self.g._fresh(fx_name)

    # ---- nodes ----------------------------------------------------------------------------
    def run(self) -> Graph:
        for node in self.gm.graph.nodes:
            if node.op in ("placeholder", "get_attr"):
                types = [t for t in _fx_types(node) if t is not None]
                check(len(types) == 1, "fx-import", f"input {node.name} has no tensor metadata; capture "
                      "with aot_autograd (fx_capture.capture_joint) so meta['val'] is set", (node.name,))
                # aot_autograd names a joint graph's output gradients tangents_<i>: the
                # backward's inputs, which the forward half never has (rules.stages)
                stage = 1 if node.op == "placeholder" and node.name.startswith("tangents") else 0
                self.env[node.name] = self.g.input(node.name, *types[0], stage=stage).name
            elif node.op == "call_function":
                self.env[node.name] = self.call(node)
            elif node.op == "output":
                self.g.output(*[self.env[o.name] for o in _flatten(node.args[0]) if o is not None])
        return self.g

    def call(self, node):
        op = aten_name(node.target)
        if op in _IDENTITY:
            return self.value(node.args[0])
        if op == "getitem":   # its source may be a _TupleValue, which value() refuses
            out = _getitem(self, node)
            self._check_types(node, out)
            return out
        args = [self.value(a) for a in node.args]
        kwargs = {k: self.value(v) for k, v in node.kwargs.items() if k not in _IGNORED_KWARGS}
        if op in _SPECIAL:
            out = _SPECIAL[op](self, node, args, kwargs)
        elif ALIASES.get(op, op) in OPS:
            try:
                # add_bound, not add: an op's own `dtype` keyword (_to_copy's) is not add's opaque-type one
                out = self.g.add_bound(op, args, kwargs, name=self.fresh(node.name)).name
            except PartitionError as e:   # a known packet, an overload the table does not
                if e.rule != "signature":  # model (e.g. view.dtype): keep it, as opaque
                    raise
                out = self.opaque(node, f"{op}.{getattr(node.target, '_overloadname', 'opaque')}")
        else:
            out = self.opaque(node, op)
        if isinstance(out, str):
            self._check_types(node, out)
        return out

    def opaque(self, node, op: str) -> str:
        """A node the partitioner keeps alone; tensors are its operands, everything else goes
        into `spec` (the call with tensor slots) so the call can be replayed in torch."""
        operands: list[str] = []

        def enc(a):
            if hasattr(a, "op") and hasattr(a, "meta"):
                operands.append(self.value(a))
                return (_TENSOR, len(operands) - 1)
            if isinstance(a, (list, tuple)):
                return tuple(enc(x) for x in a)
            kind = type(a).__name__
            if kind == "dtype":
                return (_DTYPE, _scalar(a))
            if kind == "device":
                return (_DEVICE, str(a))
            if a is None or isinstance(a, (bool, int, float, str)):
                return a
            return (_MISC, repr(a))

        spec = (enc(tuple(node.args)), tuple((k, enc(v)) for k, v in sorted(node.kwargs.items())))
        traced = _fx_types(node)
        # An output torch did not compute (None, e.g. masked by output_mask) gets a scalar
        # placeholder type: no getitem reads it, so it weighs nothing.
        types = tuple(make_type(*t, node.name) if t else make_type((), "float32", node.name) for t in traced)
        check(any(traced), "fx-import", f"{op} has no shape metadata; capture it with aot_autograd "
              "(fx_capture.capture_joint) or run ShapeProp first", (node.name,))
        target = str(node.target)
        n = Node(self.fresh(node.name), op, tuple(operands), tuple(f"arg{i}" for i in range(len(operands))),
                 (("spec", spec), ("target", target)), types)
        return self.g._insert(n).name

    def _check_types(self, node, name: str) -> None:
        """Invariant: the IR's inferred types equal the ones torch traced (catches mappings
        that bind arguments wrongly long before a numeric mismatch would)."""
        for have, want in zip(self.g.nodes[name].types, _fx_types(node)):
            if want is not None and (have.shape, have.dtype) != want:
                raise PartitionError("fx-import", f"{node.target} imported as {self.g.nodes[name].op} "
                                     f"with type {have.dtype}{list(have.shape)}, but torch traced "
                                     f"{want[1]}{list(want[0])}; fix its mapping in fx_import._SPECIAL",
                                     (node.name,))


def _flatten(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _flatten(y)
    else:
        yield x


# ---- ATen conventions that differ from the op table ---------------------------------------
def _add_sub(imp, node, args, kw):
    alpha = kw.pop("alpha", 1)
    a, b = args
    if alpha != 1:   # add(x, y, alpha=a) = x + a*y
        b = imp.g.add("mul", b, alpha).name if not isinstance(b, (int, float)) else b * alpha
    return imp.g.add(aten_name(node.target), a, b, name=imp.fresh(node.name)).name


def _reduce(imp, node, args, kw):
    dtype = kw.pop("dtype", None)
    x = args[0]
    if dtype is not None:
        x = imp.g.add("_to_copy", x, dtype).name
    return imp.g.add(aten_name(node.target), x, *args[1:], name=imp.fresh(node.name), **kw).name


def _safe_softmax(imp, node, args, kw):
    dtype = kw.pop("dtype", args[2] if len(args) > 2 else None)
    x = args[0] if dtype is None else imp.g.add("_to_copy", args[0], dtype).name
    return imp.g.add("_softmax", x, args[1], False, name=imp.fresh(node.name)).name


def _nll_forward(imp, node, args, kw):
    # ATen returns (loss, total_weight); the IR's nll_loss_forward is the loss alone and its
    # backward recomputes the weight, so total_weight is built only if something else reads it.
    if (args[2] if len(args) > 2 else kw.get("weight")) is not None:   # the IR ignores weights
        return imp.opaque(node, "nll_loss_forward.weighted")
    loss = imp.g.add("nll_loss_forward", *args, name=imp.fresh(node.name), **kw).name
    target, ignore = args[1], args[4] if len(args) > 4 else kw.get("ignore_index", -100)

    def total_weight(name):   # the number of non-ignored targets
        valid = imp.g.add("_to_copy", imp.g.add("ne", target, ignore), "float32")
        return imp.g.add("sum", valid, name=imp.fresh(name)).name
    return _TupleValue({0: loss, 1: total_weight})


def _batch_norm_functional(imp, node, args, kw):
    # (out, save_mean, save_invstd, new_running_mean, new_running_var): the IR's
    # native_batch_norm gives the first three; the running statistics are its elementwise
    # update, so decompose_batch_norm can fuse all of it. Eval mode stays opaque.
    bound = dict(zip(("input", "weight", "bias", "running_mean", "running_var", "training",
                      "momentum", "eps"), args), **kw)
    if not bound["training"] or bound["momentum"] is None:   # eval / cumulative average
        return imp.opaque(node, aten_name(node.target))
    x, mom = bound["input"], float(bound["momentum"])
    bn = imp.g.add("native_batch_norm", *(bound[k] for k in ("input", "weight", "bias", "running_mean",
                   "running_var", "training", "momentum", "eps")), name=imp.fresh(node.name)).name
    shape = imp.g.nodes[x].shape
    n = _numel(shape) // shape[1]   # values per channel
    g = imp.g

    def part(i):
        return lambda name: g.add("getitem", bn, i, name=imp.fresh(name)).name

    def running(stat, i):
        def build(name):
            new = g.add("getitem", bn, i)
            if i == 2:   # invstd -> unbiased variance: (1/invstd^2 - eps) * n/(n-1)
                var = g.add("sub", g.add("reciprocal", g.add("mul", new, new)), float(bound["eps"]))
                new = g.add("mul", var, n / max(n - 1, 1))
            old = g.add("mul", bound[stat], 1 - mom)
            return g.add("add", old, g.add("mul", new, mom), name=imp.fresh(name)).name
        return build
    return _TupleValue({0: part(0), 1: part(1), 2: part(2), 3: running("running_mean", 1),
                        4: running("running_var", 2)})


def _numel(shape) -> int:
    out = 1
    for s in shape:
        out *= s
    return out


def _nll_backward(imp, node, args, kw):
    if (args[3] if len(args) > 3 else kw.get("weight")) is not None:   # the IR ignores weights
        return imp.opaque(node, "nll_loss_backward.weighted")
    args = list(args) + [None] * (7 - len(args))
    args[6] = None   # total_weight: recomputed from the targets by the IR op
    return imp.g.add("nll_loss_backward", *args[:6], name=imp.fresh(node.name), total_weight=None).name


def _getitem(imp, node):
    src, index = node.args
    v = imp.env[src.name]
    if not isinstance(v, _TupleValue):
        return imp.g.add("getitem", v, index, name=imp.fresh(node.name)).name
    part = v.parts.get(index)
    if callable(part):
        part = v.parts[index] = part(node.name)
    check(part is not None, "fx-import", f"output {index} of {src.target} is not modelled", (node.name,))
    return part


def _layer_norm(imp, node, args, kw):
    # The op table's layer norm keeps its mean and rstd in fp32, as ATen does on CUDA; ATen on
    # the CPU keeps a 16-bit input's statistics in the input's dtype. Such a node stays opaque
    # (torch computes it, with torch's types), so the graph does not change meaning by device.
    if any(t is not None and t[1] != "float32" for t in _fx_types(node)[1:]):
        return imp.opaque(node, "native_layer_norm.16_bit_stats")
    return imp.g.add(aten_name(node.target), *args, name=imp.fresh(node.name), **kw).name


def _full(imp, node, args, kw):
    dtype = kw.pop("dtype", None) or _fx_types(node)[0][1]
    return imp.g.add("full", tuple(args[0]), args[1], dtype, name=imp.fresh(node.name)).name


_SPECIAL = {"add": _add_sub, "sub": _add_sub, "sum": _reduce, "mean": _reduce,
            "_safe_softmax": _safe_softmax, "nll_loss_forward": _nll_forward,
            "nll_loss_backward": _nll_backward, "full": _full, "native_layer_norm": _layer_norm,
            "_native_batch_norm_legit_functional": _batch_norm_functional}


def from_fx(gm) -> Graph:
    """A Graph with one input per placeholder/get_attr and one node per call_function (fewer
    where identities vanish, a few more where an ATen call needs two IR ops); outputs follow
    the fx output node, with its None entries (inputs that need no gradient) left out."""
    return _Importer(gm).run()


def fx_output_positions(gm) -> list[int]:
    """Positions in gm's flattened outputs of the IR graph's outputs, in order (the None
    entries are the ones skipped)."""
    out = next(n for n in gm.graph.nodes if n.op == "output")
    return [i for i, o in enumerate(_flatten(out.args[0])) if o is not None]
