"""Loss elimination (design doc 4.2)."""
from __future__ import annotations

from ..graph import Graph
from .rewrite import rewrite

LOSS_OPS = frozenset({"nll_loss_forward"})


def eliminate_loss(g: Graph, loss: tuple[str, ...] | None = None) -> Graph:
    """(Invariant) No node computes a loss value: each loss output (the named nodes, or every
    graph output produced by a loss op) becomes a constant 1 of the same type, and nodes only
    the loss needed are removed. Gradients are unchanged, since d loss/d loss arrives as the
    tangent input and never reads the loss."""
    names = set(loss) if loss is not None else {o for o in g.outputs if g.nodes[o].op in LOSS_OPS}

    def rule(node, out, m):
        if node.name in names:
            return out.constant(1.0, node.shape, node.dtype, name=node.name).name
        return None

    return rewrite(g, rule)
