"""The bound's caches give what they cache: along random plans of random graphs, node_charges'
precomputed terms equal in_edge_split's, the memo's cached open sets give the keys a fresh memo
computes, and blocked_groups' reused masks equal the masks computed per node."""
import random

import pytest

from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.random_graphs import random_graph
from evt_core.partition.solvers.bnb import _Search
from evt_core.partition.solvers.memo import Memo
from evt_core.partition.solvers.precede import blocked_groups
from evt_core.partition.solvers.state import in_edge_split


def random_walks(seed: int, walks: int = 3):
    """(search, k) at every depth of a few random legal placements of each component."""
    rng = random.Random(seed)
    g = random_graph(rng, rng.randint(20, 60))
    d = decompose(g)
    for comp in d.components:
        if len(comp) < 3:
            continue
        p = make_problem(g, d, tuple(comp))
        s = _Search(p, [tuple(range(p.size))], 10**18, None)
        for _ in range(walks):
            tokens = []
            for k in range(p.size):
                yield s, k
                st = s.st
                options = [t for t in range(len(st.members)) if st.can_join(k, t)]
                tokens.append(st.join(k, rng.choice(options + [len(st.members)])))
            yield s, p.size
            for token in reversed(tokens):
                s.st.undo(token)


def blocked_reference(p, st, k):
    """precede.blocked_groups without the reuse of repeated pre masks."""
    blocked, pre = [0] * p.size, [0] * p.size
    for x in range(k, p.size):
        m = 0
        for u in p.order[x]:
            m |= (1 << st.grp[u]) if u < k else pre[u]
        pre[x] = m
        blocked[x] = sum(1 << s for s in range(len(st.reach))
                         if any(st.reach[s] >> t & 1 for t in range(len(st.reach)) if m >> t & 1))
    return blocked


# 4011, 4015, 4018: graphs with a node of positive static loss (its precomputed term charges it)
@pytest.mark.parametrize("seed", [*range(4000, 4008), 4011, 4015, 4018])
def test_bound_caches_match_direct_computation(seed):
    fresh_keys = 0
    for s, k in random_walks(seed):
        p, st = s.p, s.st
        terms = s.node_charges(k)
        assert s.blocked == blocked_reference(p, st, k)
        direct = []
        for v in range(k, p.size):
            if st.in_w[v]:
                L, spare = in_edge_split(st, v, p.forbid[v], s.total_in[v], s.static_loss[v],
                                         s.blocked[v])
                direct.append((v, L, spare))
        assert [(v, L, sorted(sp)) for v, L, sp in terms] == [(v, L, sorted(sp)) for v, L, sp in direct]
        _, key = s.memo.lookup(k, 0, 10**18, st.grp, st.members, st.reach)
        _, fresh = Memo(p, s.adj).lookup(k, 0, 10**18, st.grp, st.members, st.reach)
        assert key == fresh
        fresh_keys += 1
        assert blocked_groups(p, st, k) == s.blocked
    assert fresh_keys > 0
