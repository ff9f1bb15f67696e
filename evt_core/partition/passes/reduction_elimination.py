"""Reduction elimination (design doc 4.4): a one-hot summed over its class dim is 1."""
from __future__ import annotations

from ..graph import Graph
from ..shapes import dims_of
from .rewrite import rewrite


def _factors(g: Graph, name: str, sign: int = 1):
    """Flatten a mul/neg tree into (sign, factor names)."""
    node = g.nodes[name]
    if node.op == "neg":
        return _factors(g, node.inputs[0], -sign)
    if node.op == "mul":
        s1, f1 = _factors(g, node.inputs[0], sign)
        s2, f2 = _factors(g, node.inputs[1], 1)
        return s1 * s2, f1 + f2
    return sign, [name]


def _is_one_hot(g: Graph, name: str) -> bool:
    node = g.nodes[name]
    while node.op == "_to_copy":
        node = g.nodes[node.inputs[0]]
    return node.op == "one_hot"


def eliminate_reductions(g: Graph) -> Graph:
    """(Invariant) No `sum` over the last dim remains whose operand is a product (through mul
    and neg) of exactly one one_hot over that dim and factors of extent 1 along it: since
    sum_c one_hot(y)_c = 1, such a sum is the product of the other factors (cross-entropy
    backward, dx = (softmax - one_hot) * t * mask, becomes purely elementwise)."""

    def rule(node, out, m):
        if node.op != "sum":
            return None
        src = out.nodes[m[node.inputs[0]]]
        rank = len(src.shape)
        if rank == 0 or dims_of(node.attr("dim"), rank) != (rank - 1,):
            return None
        sign, facs = _factors(out, src.name)
        hots = [f for f in facs if _is_one_hot(out, f)]
        rest = [f for f in facs if f not in hots]
        if len(hots) != 1 or out.nodes[hots[0]].shape[-1] != src.shape[-1]:
            return None
        if any(out.nodes[f].shape and out.nodes[f].shape[-1] != 1 for f in rest):
            return None
        val = rest[0] if rest else out.constant(1.0, (), src.dtype).name
        for f in rest[1:]:
            val = out.add("mul", val, f).name
        if sign < 0:
            val = out.add("neg", val).name
        return _reshape(out, val, node.shape, node.dtype)

    return rewrite(g, rule)


def _reshape(out: Graph, val: str, shape, dtype) -> str:
    v = out.nodes[val]
    if v.dtype != dtype:
        v = out.add("_to_copy", v, dtype)
    if v.shape == tuple(shape):
        return v.name
    n_v, n_s = 1, 1
    for d in v.shape:
        n_v *= d
    for d in shape:
        n_s *= d
    if n_v == n_s:
        return out.add("view", v, tuple(shape)).name
    return out.add("expand", v, tuple(shape)).name
