from evt_core import partition as P
from evt_core.partition.passes import decompose_losses
from helpers import assert_close, make_inputs


def test_log_softmax_and_its_backward():
    def before():
        g = P.Graph()
        x, dy = g.input("x", (4, 5), "float16"), g.input("dy", (4, 5), "float16")
        ls = g.add("log_softmax", x, 1)
        g.output(ls, g.add("_log_softmax_backward_data", dy, ls, 1, "float16"))
        return g

    def expected():
        g = P.Graph()
        x, dy = g.input("x", (4, 5), "float16"), g.input("dy", (4, 5), "float16")
        sm = g.add("softmax", x, 1)
        ls = g.add("log", sm)
        g.output(ls, g.add("sub", dy, g.add("mul", sm, g.add("sum", dy, [1], True))))
        return g

    assert decompose_losses(before()).structure() == expected().structure()


def test_nll_backward_is_exact():
    g = P.Graph()
    x, t = g.input("x", (6, 5), "float16"), g.input("t", (6,), "int64")
    tan = g.input("tan", (), "float16")
    ls = g.add("log_softmax", x, 1)
    g.output(g.add("nll_loss_backward", tan, ls, t, None, 1, -100, None))
    after = decompose_losses(g)
    assert "nll_loss_backward" not in {n.op for n in after.nodes.values()}
    inputs = make_inputs(g, classes=5)
    inputs["t"][0] = -100                                  # an ignored label
    assert_close(P.evaluate(after, inputs)[after.outputs[0]], P.evaluate(g, inputs)[g.outputs[0]], tol=1e-3)
