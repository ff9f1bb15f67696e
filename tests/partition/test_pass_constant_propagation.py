from evt_core import partition as P
from evt_core.partition.passes import propagate_constants


def test_constants_fold_and_identities_vanish():
    def before():
        g = P.Graph()
        x = g.input("x", (4, 4), "float32")
        two = g.add("add", g.constant(1.0, (4, 4), "float32"), 1.0)
        g.output(g.add("mul", g.add("mul", x, 1.0), two), g.add("div", x, 4.0), g.add("sum", two, [1]))
        return g

    def expected():
        g = P.Graph()
        x = g.input("x", (4, 4), "float32")
        g.output(g.add("mul", x, g.constant(2.0, (4, 4), "float32")),
                 g.add("mul", x, g.constant(0.25, (), "float32")), g.constant(8.0, (4,), "float32"))
        return g

    assert propagate_constants(before()).structure() == expected().structure()
