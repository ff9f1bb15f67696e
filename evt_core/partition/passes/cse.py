"""Common-subexpression elimination (design doc 4.7): hash-based value numbering."""
from __future__ import annotations

from ...dtypes import float_bits
from ..graph import Graph
from ..optable import Kind
from .rewrite import copy, dce

COMMUTATIVE = frozenset({"add", "mul", "maximum", "minimum", "eq", "ne"})


def eliminate_common_subexpressions(g: Graph) -> Graph:
    """(Invariant) No two non-input nodes apply the same op to the same operands with the same
    attributes; operands of commutative ops are compared as a multiset. Opaque ops are kept
    apart, since they may have effects the table does not know. O(N) dictionary lookups."""
    out, m, seen = Graph(), {}, {}
    for node in g.nodes.values():
        ins = [m[i] for i in node.inputs]
        key = None
        if node.kind not in (Kind.INPUT, Kind.OPAQUE):
            operands = tuple(sorted(ins)) if node.op in COMMUTATIVE else tuple(zip(node.params, ins))
            key = (node.op, operands, _exact(node.attrs))
        if key in seen:
            m[node.name] = seen[key]
            continue
        m[node.name] = out._insert(node).name if node.kind is Kind.INPUT else copy(out, node, ins).name
        if key is not None:
            seen[key] = m[node.name]
    out.outputs = [m[o] for o in g.outputs]
    return dce(out)


def _exact(value):
    """`value` with every float as its bits (dtypes.float_bits: full(0.0) and full(-0.0) are
    different constants)."""
    if isinstance(value, float):
        return ("float", float_bits(value))
    if isinstance(value, (tuple, list)):
        return tuple(_exact(v) for v in value)
    return value
