"""Permutation and reshape folding (design doc 4.6 step 1, 4.7)."""
from __future__ import annotations

from ..graph import Graph
from .rewrite import rewrite


def _as_perm(node, rank):
    if node.op == "permute":
        return tuple(d % rank for d in node.attr("dims"))
    dims = list(range(rank))
    i, j = (0, 1) if node.op == "t" else (node.attr("dim0") % rank, node.attr("dim1") % rank)
    if node.op == "t" and rank < 2:
        return tuple(dims)
    dims[i], dims[j] = dims[j], dims[i]
    return tuple(dims)


def fold_permutations(g: Graph) -> Graph:
    """(Invariant) transpose and t are spelled permute; no permute reads a permute and no view
    reads a view (chains compose into one op); no permute is the identity and no view keeps
    its operand's shape (those become the operand itself)."""

    def rule(node, out, m):
        if node.op in ("permute", "transpose", "t"):
            src = out.nodes[m[node.inputs[0]]]
            perm = _as_perm(node, len(node.shape))
            if src.op == "permute":                       # x.permute(p).permute(q) = x.permute(p[q])
                inner = src.attr("dims")
                perm, src = tuple(inner[q] for q in perm), out.nodes[src.inputs[0]]
            if perm == tuple(range(len(perm))):
                return src.name
            return out.add("permute", src, perm, name=_name(out, node.name)).name
        if node.op == "view":
            src = out.nodes[m[node.inputs[0]]]
            if src.op == "view":
                src = out.nodes[src.inputs[0]]
            if src.shape == node.shape:
                return src.name
            return out.add("view", src, node.shape, name=_name(out, node.name)).name
        return None

    return rewrite(g, rule)


def _name(out, name):
    return name if name not in out.nodes else None
