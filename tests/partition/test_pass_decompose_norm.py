from evt_core import partition as P
from evt_core.partition.passes import decompose_batch_norm, decompose_layer_norm_backward
from helpers import assert_close, make_inputs


def test_layer_norm_backward_parameter_grads_become_sums():
    def inputs(g):
        return [g.input(n, s, "float16") for n, s in (("dy", (6, 8)), ("x", (6, 8)), ("w", (8,)), ("b", (8,)))]

    def before():
        g = P.Graph()
        dy, x, w, b = inputs(g)
        ln = g.add("native_layer_norm", x, [8], w, b, 1e-5)
        mean, rstd = g.add("getitem", ln, 1), g.add("getitem", ln, 2)
        lb = g.add("native_layer_norm_backward", dy, x, [8], mean, rstd, w, b, (True, True, True))
        g.output(*(g.add("getitem", lb, i) for i in range(3)))
        return g

    def expected():
        g = P.Graph()
        dy, x, w, b = inputs(g)
        ln = g.add("native_layer_norm", x, [8], w, b, 1e-5)
        mean, rstd = g.add("getitem", ln, 1), g.add("getitem", ln, 2)
        lb = g.add("native_layer_norm_backward", dy, x, [8], mean, rstd, w, b, (True, False, False))
        dgamma = g.add("sum", g.add("mul", dy, g.add("mul", g.add("sub", x, mean), rstd)), [0])
        g.output(g.add("getitem", lb, 0), dgamma, g.add("sum", dy, [0]))
        return g

    b, after = before(), decompose_layer_norm_backward(before())
    assert after.structure() == expected().structure()
    ins = make_inputs(b)
    for o1, o2 in zip(b.outputs, after.outputs):
        assert_close(P.evaluate(after, ins)[o2], P.evaluate(b, ins)[o1], what=o1)


def test_batch_norm_statistics_become_sums():
    g = P.Graph()
    x = g.input("x", (2, 3, 4, 4), "float32")
    gm, bt = g.input("g", (3,), "float32"), g.input("b", (3,), "float32")
    rm, rv = g.input("rm", (3,), "float32"), g.input("rv", (3,), "float32")
    bn = g.add("native_batch_norm", x, gm, bt, rm, rv, True, 0.1, 1e-5)
    g.output(*(g.add("getitem", bn, i) for i in range(3)))
    after = decompose_batch_norm(g)
    ops = [n.op for n in after.nodes.values()]
    assert "native_batch_norm" not in ops and ops.count("sum") == 2
    ins = make_inputs(g)
    for o1, o2 in zip(g.outputs, after.outputs):
        assert_close(P.evaluate(after, ins)[o2], P.evaluate(g, ins)[o1], tol=1e-4, what=o1)
