"""Normalisation as partial reductions (design doc 4.5): the parameter gradients of layer
norm and the statistics of batch norm become explicit sums, which fuse into the epilogue of
the GEMM or convolution that produces their operand."""
from __future__ import annotations

from ..graph import Graph
from .rewrite import copy, rewrite


def decompose_layer_norm_backward(g: Graph) -> Graph:
    """(Invariant) Every native_layer_norm_backward computes only grad_input (output_mask =
    (True, False, False)); grad_weight = sum_tokens(dy * (x - mean) * rstd) and
    grad_bias = sum_tokens(dy) are explicit `sum` nodes over the leading (token) dims."""

    def rule(node, out, m):
        if node.op == "native_layer_norm_backward":
            return copy(out, node, [m[i] for i in node.inputs], output_mask=(True, False, False)).name
        src = g.nodes[node.inputs[0]] if node.inputs else None
        if node.op == "getitem" and src.op == "native_layer_norm_backward" and node.attr("index") > 0:
            a = {p: m[i] for p, i in zip(src.params, src.inputs)}
            lead = list(range(len(g.nodes[src.inputs[0]].shape) - len(src.attr("normalized_shape"))))
            dy = a["grad_out"]
            if node.attr("index") == 2:
                return out.add("sum", dy, lead, name=_keep(out, node.name)).name
            xhat = out.add("mul", out.add("sub", a["input"], a["mean"]), a["rstd"])
            return out.add("sum", out.add("mul", dy, xhat), lead, name=_keep(out, node.name)).name
        return None

    return rewrite(g, rule)


def decompose_batch_norm(g: Graph) -> Graph:
    """(Invariant) No training-mode native_batch_norm remains: mean = sum(x / count) and
    mean_sq = sum(x * x / count) over all dims but the channel (two reductions that fuse into
    the producer's epilogue), invstd = rsqrt(mean_sq - mean^2 + eps), and the normalisation is
    elementwise. The statistics outputs keep their float32 type."""
    parts: dict[str, tuple[str, str, str]] = {}

    def rule(node, out, m):
        if node.op == "native_batch_norm" and node.attr("training"):
            parts[node.name] = _batch_norm(node, out, {p: m[i] for p, i in zip(node.params, node.inputs)})
            return parts[node.name][0]
        if node.op == "getitem" and node.inputs[0] in parts:
            return parts[node.inputs[0]][node.attr("index")]
        return None

    return rewrite(g, rule)


def _batch_norm(node, out: Graph, a) -> tuple[str, str, str]:
    x = out.nodes[a["input"]]
    dims = [0] + list(range(2, len(x.shape)))
    count = 1
    for d in dims:
        count *= x.shape[d]
    bshape = [1, x.shape[1]] + [1] * (len(x.shape) - 2)
    inv = out.constant(1.0 / count, (), "float32")
    mean = out.add("sum", out.add("mul", x, inv), dims)
    mean_sq = out.add("sum", out.add("mul", out.add("mul", x, x), inv), dims)
    var = out.add("sub", mean_sq, out.add("mul", mean, mean))
    invstd = out.add("rsqrt", out.add("add", var, float(node.attr("eps"))))
    y = out.add("mul", out.add("sub", x, out.add("view", mean, bshape)), out.add("view", invstd, bshape))
    if a.get("weight"):
        y = out.add("mul", y, out.add("view", a["weight"], bshape))
    if a.get("bias"):
        y = out.add("add", y, out.add("view", a["bias"], bshape))
    return (y.name, out.add("_to_copy", mean, "float32").name, out.add("_to_copy", invstd, "float32").name)


def _keep(out: Graph, name: str):
    return name if name not in out.nodes else None
