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


def test_signed_zero_constants_stay_apart():
    """full(0.0) and full(-0.0) are different values (1/x: +inf against -inf); the value
    numbering compared attributes with ==, which identifies them."""
    from evt_core import partition as P
    from evt_core.partition.passes.cse import eliminate_common_subexpressions
    g = P.Graph()
    x = g.input("x", (4,), "float32")
    a = g.add("div", 1.0, g.add("mul", x, g.constant(0.0, (4,), "float32")))
    b = g.add("div", 1.0, g.add("mul", x, g.constant(-0.0, (4,), "float32")))
    c = g.add("div", 1.0, g.add("mul", x, g.constant(0.0, (4,), "float32")))
    g.output(a, b, c)
    out = eliminate_common_subexpressions(g)
    assert len({n for n in out.outputs}) == 2
