"""A classifier head with cross-entropy loss, forward and backward (the GCN "U-turn")."""
from __future__ import annotations

from ..graph import Graph


def cross_entropy_head(tokens: int = 8192, d: int = 768, classes: int = 1024,
                       dtype: str = "float16") -> Graph:
    g = Graph()
    h, w = g.input("h", (tokens, d), dtype), g.input("w", (d, classes), dtype)
    target = g.input("target", (tokens,), "int64")
    tangent = g.input("tangent_loss", (), dtype)
    logits = g.add("mm", h, w)
    ls = g.add("log_softmax", logits, 1)
    loss = g.add("nll_loss_forward", ls, target, None, 1, -100, name="loss")
    gls = g.add("nll_loss_backward", tangent, ls, target, None, 1, -100, None)
    glogits = g.add("_log_softmax_backward_data", gls, ls, 1, dtype)
    dw = g.add("mm", g.add("t", h), glogits, name="grad_w")
    dh = g.add("mm", glogits, g.add("t", w), name="grad_h")
    g.output(loss, dw, dh)
    return g
