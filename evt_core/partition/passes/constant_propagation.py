"""Constant propagation over uniform constants (design doc 4.7)."""
from __future__ import annotations

from math import prod

import numpy as np

from ..graph import Graph
from ..optable import OPS, Kind
from .rewrite import const_value, rewrite

_LAYOUT = frozenset({"view", "expand", "permute", "transpose", "t", "unsqueeze", "squeeze", "clone",
                     "_to_copy"})
_FOLDABLE = frozenset({"neg", "relu", "tanh", "sigmoid", "exp", "log", "rsqrt", "sqrt", "abs", "erf",
                       "reciprocal", "add", "sub", "mul", "div", "maximum", "minimum", "rsub", "pow"})


def propagate_constants(g: Graph) -> Graph:
    """(Invariant) No elementwise, layout or reduction node has only uniform-constant operands
    (it is evaluated at compile time into a `full`); x*1, x+0 and x-0 whose result has x's type
    are x; division by a constant is multiplication by its reciprocal."""

    def rule(node, out, m):
        ins = [m[i] for i in node.inputs]
        vals = [const_value(out, i) for i in ins]
        if node.kind in (Kind.INPUT, Kind.CONST, Kind.OPAQUE, Kind.ANCHOR):
            return None
        if ins and all(v is not None for v in vals):
            value = _fold(node, vals, out, ins)
            if value is not None:
                return out.constant(value, node.shape, node.dtype).name
        if node.op in ("mul", "add", "sub", "div") and len(ins) == 2:
            x, c = ins[0], vals[1]
            if node.op == "mul" and c is None and vals[0] is not None:
                x, c = ins[1], vals[0]
            keep_x = out.nodes[x].types[0] == node.types[0]
            if keep_x and ((node.op == "mul" and c == 1) or (node.op in ("add", "sub") and c == 0)):
                return x
            if node.op == "div" and c not in (None, 0):
                inv = out.constant(1.0 / c, out.nodes[ins[1]].shape, out.nodes[ins[1]].dtype)
                return out.add("mul", ins[0], inv, name=node.name if node.name not in out.nodes else None).name
        return None

    return rewrite(g, rule)


def _fold(node, vals, out, ins):
    if node.op in _LAYOUT:
        return vals[0]
    if node.op in ("sum", "mean", "amax", "amin"):
        src = out.nodes[ins[0]].shape
        count = prod(src) // max(prod(node.shape), 1)
        return vals[0] * count if node.op == "sum" else vals[0]
    if node.op in _FOLDABLE:
        args = {p: np.float32(v) for p, v in zip(node.params, vals)}
        return float(OPS[node.op].impl(**args, **dict(node.attrs)))
    return None
