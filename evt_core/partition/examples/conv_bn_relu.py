"""A convolution + training-mode batch norm + ReLU block (forward)."""
from __future__ import annotations

from ..graph import Graph


def conv_bn_relu(n: int = 32, c: int = 64, k: int = 64, hw: int = 56, dtype: str = "float16") -> Graph:
    g = Graph()
    x, w = g.input("x", (n, c, hw, hw), dtype), g.input("w", (k, c, 3, 3), dtype)
    gamma, beta = g.input("gamma", (k,), dtype), g.input("beta", (k,), dtype)
    rm, rv = g.input("running_mean", (k,), "float32"), g.input("running_var", (k,), "float32")
    y = g.add("convolution", x, w, None, (1, 1), (1, 1), (1, 1), False, (0, 0), 1)
    bn = g.add("native_batch_norm", y, gamma, beta, rm, rv, True, 0.1, 1e-5)
    out = g.add("relu", g.add("getitem", bn, 0), name="out")
    g.output(out, g.add("getitem", bn, 1, name="save_mean"), g.add("getitem", bn, 2, name="save_invstd"))
    return g
