"""An MLP block, forward and backward: y = gelu_tanh(x W1 + b1) W2 + b2 and its gradients."""
from __future__ import annotations

from ..graph import Graph


def mlp_block(tokens: int = 8192, d: int = 768, hidden: int = 3072, dtype: str = "float16") -> Graph:
    g = Graph()
    x = g.input("x", (tokens, d), dtype)
    w1, b1 = g.input("w1", (d, hidden), dtype), g.input("b1", (hidden,), dtype)
    w2, b2 = g.input("w2", (hidden, d), dtype), g.input("b2", (d,), dtype)
    dy = g.input("tangent_y", (tokens, d), dtype)
    a1 = g.add("addmm", b1, x, w1)
    h = g.add("gelu", a1, approximate="tanh")
    y = g.add("addmm", b2, h, w2, name="y")
    # backward
    dw2 = g.add("mm", g.add("t", h), dy, name="grad_w2")
    db2 = g.add("sum", dy, [0], name="grad_b2")
    dh = g.add("mm", dy, g.add("t", w2))
    da1 = g.add("gelu_backward", dh, a1, approximate="tanh")
    dw1 = g.add("mm", g.add("t", x), da1, name="grad_w1")
    db1 = g.add("sum", da1, [0], name="grad_b1")
    dx = g.add("mm", da1, g.add("t", w1), name="grad_x")
    g.output(y, dx, dw1, db1, dw2, db2)
    return g
