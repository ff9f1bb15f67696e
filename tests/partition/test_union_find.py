"""evt_core.partition.union_find: the partitioner's one disjoint-set structure."""
import random

from evt_core.partition.union_find import DisjointSets


def test_sets_match_the_connected_components_of_random_edges():
    rng = random.Random(3)
    for _ in range(50):
        n = rng.randint(1, 30)
        edges = [(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 40))]
        sets = DisjointSets(n)
        joined = [sets.union(u, v) for u, v in edges]
        comp = list(range(n))                      # reference: relabel until stable
        for _ in range(n):
            for u, v in edges:
                comp[u] = comp[v] = min(comp[u], comp[v])
        assert all((sets.find(a) == sets.find(b)) == (comp[a] == comp[b]) for a in range(n) for b in range(n))
        assert sum(joined) == n - len(sets.groups())     # each successful union merges two sets
        assert sorted(m for g in sets.groups().values() for m in g) == list(range(n))
