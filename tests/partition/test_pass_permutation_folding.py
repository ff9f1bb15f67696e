from evt_core import partition as P
from evt_core.partition.passes import fold_permutations


def test_chains_compose_and_identities_vanish():
    def before():
        g = P.Graph()
        x = g.input("x", (2, 3, 4), "float16")
        p = g.add("permute", g.add("transpose", x, 0, 2), (1, 0, 2))
        ident = g.add("permute", g.add("permute", x, (1, 0, 2)), (1, 0, 2))
        v = g.add("view", g.add("view", x, (6, 4)), (24,))
        g.output(p, g.add("relu", ident), v, g.add("view", x, (2, 3, 4)))
        return g

    def expected():
        g = P.Graph()
        x = g.input("x", (2, 3, 4), "float16")
        g.output(g.add("permute", x, (1, 2, 0)), g.add("relu", x), g.add("view", x, (24,)), x)
        return g

    assert fold_permutations(before()).structure() == expected().structure()
