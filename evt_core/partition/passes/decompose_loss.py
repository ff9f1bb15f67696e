"""Decomposition of the loss ops (design doc 4.3): log-softmax and NLL backward become a
softmax anchor plus elementwise ops and sums, which reduction elimination then simplifies;
BCE-with-logits becomes elementwise ops and a sum, which a GEMM epilogue computes."""
from __future__ import annotations

from math import prod

from ..graph import Graph
from .rewrite import rewrite


def decompose_losses(g: Graph) -> Graph:
    """(Invariant) No _log_softmax, _log_softmax_backward_data or nll_loss_backward remains:
    log_softmax(x) = log(softmax(x)); its backward is g - softmax(x) * sum(g, dim, keepdim)
    (reading the softmax directly when the output is log(softmax)); nll_loss_backward is
    -one_hot(target) * mask * tangent / count, exactly ATen's mean (count of non-ignored
    labels) or sum reduction; binary_cross_entropy_with_logits(x, t) without weights is
    relu(x) - x·t + log(1 + exp(-|x|)) (ATen's stable form; log1p is not an epilogue op, and
    the two differ by under 1e-7 absolute per element), summed or averaged as its reduction says."""

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
        if node.op == BCE_WITH_LOGITS:
            return _bce_with_logits(node, out, ins)
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
    if out.nodes[scale].shape:    # reduction="none": one gradient per row, beside the mask's column
        scale = out.add("unsqueeze", scale, -1)
    if node.attr("reduction") == 1:
        scale = out.add("div", scale, out.add("sum", mask))
    col = out.add("mul", out.add("unsqueeze", mask, -1), scale)
    return out.add("neg", out.add("mul", hot, col), name=_keep(out, node.name)).name


BCE_WITH_LOGITS = "binary_cross_entropy_with_logits"   # opaque in the op table: read from its fx spec
# The ops decompose_losses leaves under a loss op's own name, from the same operands (what the
# torch layer's boundary check trusts a rewritten loss op as): loss op -> possible IR ops.
KEPT_NAME_OPS = {"_log_softmax": ("log",), "_log_softmax_backward_data": ("sub",), "nll_loss_backward": ("neg",),
                 BCE_WITH_LOGITS: ("sum", "div", "mul")}
_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}         # ATen's Reduction enum


def _bce_with_logits(node, out: Graph, ins):
    """None (kept opaque) unless it is (logits, target) with no weights and a known reduction."""
    spec = node.attr("spec") if "spec" in dict(node.attrs) else None
    if not spec or len(ins) != 2 or not 2 <= len(spec[0]) <= 5:
        return None
    # (self, target, weight=None, pos_weight=None, reduction=Mean), positional or by keyword
    given = dict(zip(("self", "target", "weight", "pos_weight", "reduction"), spec[0]))
    args = {"weight": None, "pos_weight": None, "reduction": 1, **given, **dict(spec[1])}
    if args["weight"] is not None or args["pos_weight"] is not None or args["reduction"] not in _REDUCTIONS:
        return None
    x, t = ins
    soft = out.add("log", out.add("add", out.add("exp", out.add("neg", out.add("abs", x))), 1.0))
    value = out.add("add", out.add("sub", out.add("relu", x), out.add("mul", x, t)), soft)
    reduction = _REDUCTIONS[args["reduction"]]
    if reduction == "none":
        return out.add("mul", value, 1.0, name=_keep(out, node.name)).name
    if reduction == "mean":   # scaled before the sum, so the loss stays one reduction (one kernel output)
        value = out.add("mul", value, 1.0 / prod(out.nodes[x].shape))
    return out.add("sum", value, name=_keep(out, node.name)).name


def _keep(out: Graph, name: str):
    return name if name not in out.nodes else None
