"""One BERT-base encoder layer, forward and backward: multi-head attention (bmm, softmax),
residuals, two layer norms and the GELU FFN, with every weight gradient."""
from __future__ import annotations

from ..graph import Graph


def _heads(g, x2d, b, s, nh, d, order):
    """(T, H) -> (B*nh, S, d) (order (0,2,1,3)) or (B*nh, d, S) (order (0,2,3,1))."""
    p = g.add("permute", g.add("view", x2d, (b, s, nh, d)), order)
    return g.add("view", p, (b * nh,) + ((s, d) if order == (0, 2, 1, 3) else (d, s)))


def _merge(g, xh, b, s, nh, d, order):
    """Inverse of _heads for the gradient flowing back to (T, H)."""
    shape = (b, nh, s, d) if order == (0, 2, 1, 3) else (b, nh, d, s)
    back = (0, 2, 1, 3) if order == (0, 2, 1, 3) else (0, 3, 1, 2)
    return g.add("view", g.add("permute", g.add("view", xh, shape), back), (b * s, nh * d))


def _linear_backward(g, dy, x, w, tag):
    dw = g.add("mm", g.add("t", x), dy, name=f"grad_w{tag}")
    db = g.add("sum", dy, [0], name=f"grad_b{tag}")
    return g.add("mm", dy, g.add("t", w)), dw, db


def bert_layer(batch: int = 32, seq: int = 128, hidden: int = 768, heads: int = 12,
               ffn: int = 3072, dtype: str = "float16") -> Graph:
    g, T, d = Graph(), batch * seq, hidden // heads
    x = g.input("x", (T, hidden), dtype)
    P = {}
    for n, (i, o) in {"q": (hidden, hidden), "k": (hidden, hidden), "v": (hidden, hidden),
                      "o": (hidden, hidden), "f1": (hidden, ffn), "f2": (ffn, hidden)}.items():
        P["w" + n], P["b" + n] = g.input("w" + n, (i, o), dtype), g.input("b" + n, (o,), dtype)
    for n in ("1", "2"):
        P["g" + n], P["be" + n] = g.input("ln_w" + n, (hidden,), dtype), g.input("ln_b" + n, (hidden,), dtype)
    dout = g.input("tangent_out", (T, hidden), dtype)
    q, k, v = (g.add("addmm", P["b" + n], x, P["w" + n]) for n in "qkv")
    qh, kt, vh = _heads(g, q, batch, seq, heads, d, (0, 2, 1, 3)), \
        _heads(g, k, batch, seq, heads, d, (0, 2, 3, 1)), _heads(g, v, batch, seq, heads, d, (0, 2, 1, 3))
    scores = g.add("mul", g.add("bmm", qh, kt), d ** -0.5)
    attn = g.add("softmax", scores, -1)
    ctx = _merge(g, g.add("bmm", attn, vh), batch, seq, heads, d, (0, 2, 1, 3))
    r1 = g.add("add", g.add("addmm", P["bo"], ctx, P["wo"]), x)
    ln1 = g.add("native_layer_norm", r1, [hidden], P["g1"], P["be1"], 1e-5)
    h1, mean1, rstd1 = (g.add("getitem", ln1, i) for i in range(3))
    f1 = g.add("addmm", P["bf1"], h1, P["wf1"])
    act = g.add("gelu", f1, approximate="tanh")
    r2 = g.add("add", g.add("addmm", P["bf2"], act, P["wf2"]), h1)
    ln2 = g.add("native_layer_norm", r2, [hidden], P["g2"], P["be2"], 1e-5)
    out, mean2, rstd2 = (g.add("getitem", ln2, i) for i in range(3))
    # ---- backward ----
    lb2 = g.add("native_layer_norm_backward", dout, r2, [hidden], mean2, rstd2, P["g2"], P["be2"], (True,) * 3)
    dr2, dg2, dbe2 = (g.add("getitem", lb2, i, name=nm) for i, nm in enumerate(("dr2", "grad_ln_w2", "grad_ln_b2")))
    dact, dwf2, dbf2 = _linear_backward(g, dr2, act, P["wf2"], "f2")
    df1 = g.add("gelu_backward", dact, f1, approximate="tanh")
    dh1a, dwf1, dbf1 = _linear_backward(g, df1, h1, P["wf1"], "f1")
    dh1 = g.add("add", dh1a, dr2)
    lb1 = g.add("native_layer_norm_backward", dh1, r1, [hidden], mean1, rstd1, P["g1"], P["be1"], (True,) * 3)
    dr1, dg1, dbe1 = (g.add("getitem", lb1, i, name=nm) for i, nm in enumerate(("dr1", "grad_ln_w1", "grad_ln_b1")))
    dctx2, dwo, dbo = _linear_backward(g, dr1, ctx, P["wo"], "o")
    dctx = _heads(g, dctx2, batch, seq, heads, d, (0, 2, 1, 3))
    dattn = g.add("bmm", dctx, g.add("transpose", vh, 1, 2))
    dvh = g.add("bmm", g.add("transpose", attn, 1, 2), dctx)
    dscores = g.add("mul", g.add("_softmax_backward_data", dattn, attn, -1, dtype), d ** -0.5)
    dqh = g.add("bmm", dscores, g.add("transpose", kt, 1, 2))
    dkt = g.add("bmm", g.add("transpose", qh, 1, 2), dscores)
    dq = _merge(g, dqh, batch, seq, heads, d, (0, 2, 1, 3))
    dk = _merge(g, dkt, batch, seq, heads, d, (0, 2, 3, 1))
    dv = _merge(g, dvh, batch, seq, heads, d, (0, 2, 1, 3))
    grads = [_linear_backward(g, dn, x, P["w" + n], n) for dn, n in ((dq, "q"), (dk, "k"), (dv, "v"))]
    dx = g.add("add", g.add("add", g.add("add", grads[0][0], grads[1][0]), grads[2][0]), dr1, name="grad_x")
    g.output(out, dx, dg1, dbe1, dg2, dbe2, dwo, dbo, dwf1, dbf1, dwf2, dbf2,
             *[t for gr in grads for t in gr[1:]])
    return g
