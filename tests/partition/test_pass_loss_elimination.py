from evt_core import partition as P
from evt_core.partition.passes import eliminate_loss


def test_loss_becomes_constant_and_forward_loss_is_dead():
    def before():
        g = P.Graph()
        x, t = g.input("x", (4, 5), "float16"), g.input("t", (4,), "int64")
        ls = g.add("log_softmax", x, 1)
        loss = g.add("nll_loss_forward", ls, t, None, 1, -100, name="loss")
        g.output(loss, g.add("exp", ls))
        return g

    def expected():
        g = P.Graph()
        x, t = g.input("x", (4, 5), "float16"), g.input("t", (4,), "int64")
        ls = g.add("log_softmax", x, 1)
        g.output(g.constant(1.0, (), "float16", name="loss"), g.add("exp", ls))
        return g

    assert eliminate_loss(before()).structure() == expected().structure()
