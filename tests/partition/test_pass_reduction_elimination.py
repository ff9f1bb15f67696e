from evt_core import partition as P
from evt_core.partition.passes import eliminate_reductions


def test_sum_of_one_hot_over_classes_disappears():
    def inputs(g):
        return g.input("t", (6,), "int64"), g.input("s", (6, 1), "float16")

    def before():
        g = P.Graph()
        t, s = inputs(g)
        hot = g.add("_to_copy", g.add("one_hot", t, 5), "float16")
        g.output(g.add("sum", g.add("neg", g.add("mul", hot, s)), [1], True))
        return g

    def expected():
        g = P.Graph()
        t, s = inputs(g)
        g.output(g.add("neg", s))
        return g

    assert eliminate_reductions(before()).structure() == expected().structure()


def test_factor_varying_along_classes_keeps_the_sum():
    g = P.Graph()
    t, s = g.input("t", (6,), "int64"), g.input("s", (6, 5), "float16")
    hot = g.add("_to_copy", g.add("one_hot", t, 5), "float16")
    g.output(g.add("sum", g.add("mul", hot, s), [1], True))
    assert eliminate_reductions(g).structure() == g.structure()
