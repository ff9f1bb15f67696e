"""Decomposition of the loss ops (design doc 4.3): log-softmax and NLL backward become a
softmax anchor plus elementwise ops and sums, which reduction elimination then simplifies."""
from __future__ import annotations

from ..graph import Graph
from .rewrite import rewrite


def decompose_losses(g: Graph) -> Graph:
    """(Invariant) No _log_softmax, _log_softmax_backward_data or nll_loss_backward remains:
    log_softmax(x) = log(softmax(x)); its backward is g - softmax(x) * sum(g, dim, keepdim)
    (reading the softmax directly when the output is log(softmax)); nll_loss_backward is
    -one_hot(target) * mask * tangent / count, exactly ATen's mean (count of non-ignored
    labels) or sum reduction."""

    def rule(node, out, m):
        ins = [m[i] for i in node.inputs]
        if node.op == "_log_softmax":
            sm = out.add("softmax", ins[0], node.attr("dim"))
            return out.add("log", sm, name=_keep(out, node.name)).name
        if node.op == "_log_softmax_backward_data":
            grad, res = ins
            src = out.nodes[res]
            soft = src.inputs[0] if src.op == "log" and out.nodes[src.inputs[0]].op == "_softmax" \
                else out.add("exp", res).name
            total = out.add("sum", grad, [node.attr("dim")], True)
            return out.add("sub", grad, out.add("mul", soft, total), name=_keep(out, node.name)).name
        if node.op == "nll_loss_backward":
            return _nll_backward(node, out, dict(zip(node.params, ins)))
        return None

    return rewrite(g, rule)


def _nll_backward(node, out: Graph, a) -> str:
    logits, target = out.nodes[a["self"]], a["target"]
    dtype, classes = logits.dtype, logits.shape[-1]
    valid = out.add("ne", target, node.attr("ignore_index"))
    safe = out.add("where", valid, target, out.constant(0, (), "int64"))
    hot = out.add("_to_copy", out.add("one_hot", safe, classes), dtype)
    mask = out.add("_to_copy", valid, dtype)
    scale = a["grad_output"]
    if node.attr("reduction") == 1:
        scale = out.add("div", scale, out.add("sum", mask))
    col = out.add("mul", out.add("unsqueeze", mask, -1), scale)
    return out.add("neg", out.add("mul", hot, col), name=_keep(out, node.name)).name


def _keep(out: Graph, name: str):
    return name if name not in out.nodes else None
