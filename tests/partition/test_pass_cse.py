from evt_core import partition as P
from evt_core.partition.passes import eliminate_common_subexpressions


def test_commutative_duplicates_merge():
    def before():
        g = P.Graph()
        x, y = g.input("x", (4,), "float16"), g.input("y", (4,), "float16")
        g.output(g.add("mul", g.add("add", x, y), g.add("add", y, x)), g.add("relu", x), g.add("relu", x))
        return g

    def expected():
        g = P.Graph()
        x, y = g.input("x", (4,), "float16"), g.input("y", (4,), "float16")
        a, r = g.add("add", x, y), g.add("relu", x)
        g.output(g.add("mul", a, a), r, r)
        return g

    after = eliminate_common_subexpressions(before())
    assert after.structure() == expected().structure()
    assert len(after.compute_nodes()) == 3
