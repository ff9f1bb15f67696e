"""Solutions cached by structure, so that repeated transformer layers are solved once.

The key is a Weisfeiler-Lehman hash of a `Problem` (node colours refined by weighted in/out
edges, outside-path order edges and forbidden-pair counts; names play no part). Nodes are then
put in canonical order (colour, then topological position) and the whole relabelled problem is
compared, so a hash collision or an automorphism the ordering cannot resolve is a miss, never a
wrong answer. O(rounds * E log E) per problem."""
from __future__ import annotations

import hashlib

from .problem import Problem, bits

_ROUNDS = 3


def _colours(p: Problem) -> list[str]:
    ins = [[] for _ in range(p.size)]
    outs = [[] for _ in range(p.size)]
    for u, v, w in p.edges:
        ins[v].append((u, w))
        outs[u].append((v, w))
    col = [f"{bin(p.forbid[i]).count('1')}" for i in range(p.size)]
    for _ in range(_ROUNDS):
        col = [_h((col[i], sorted((col[u], w) for u, w in ins[i]), sorted((col[v], w) for v, w in outs[i]),
                   sorted(col[u] for u in p.order[i]))) for i in range(p.size)]
    return col


def _h(obj) -> str:
    return hashlib.blake2b(repr(obj).encode(), digest_size=12).hexdigest()


def canonical(p: Problem) -> tuple[str, list[int], tuple]:
    """(WL hash, canonical order of local indices, the problem relabelled into that order)."""
    col = _colours(p)
    perm = sorted(range(p.size), key=lambda i: (col[i], i))
    pos = {i: k for k, i in enumerate(perm)}
    sig = (p.fixed_cost,
           tuple(sorted((pos[u], pos[v], w) for u, v, w in p.edges)),
           tuple(sum(1 << pos[j] for j in bits(p.forbid[i])) for i in perm),
           tuple(tuple(sorted(pos[u] for u in p.order[i])) for i in perm))
    return _h(sorted(col) + [p.fixed_cost]), perm, sig


class SolutionCache:
    """Maps a problem's structure to its groups; stores proved-optimal solutions only."""

    def __init__(self):
        self._store: dict[str, list[tuple[tuple, tuple]]] = {}
        self.hits = self.misses = 0

    def get(self, p: Problem):
        key, perm, sig = canonical(p)
        for stored_sig, groups in self._store.get(key, ()):
            if stored_sig == sig:
                self.hits += 1
                return tuple(tuple(sorted(perm[k] for k in grp)) for grp in groups)
        self.misses += 1
        return None

    def put(self, p: Problem, groups) -> None:
        key, perm, sig = canonical(p)
        pos = {i: k for k, i in enumerate(perm)}
        self._store.setdefault(key, []).append((sig, tuple(tuple(pos[i] for i in g) for g in groups)))

    def __len__(self) -> int:
        return sum(len(v) for v in self._store.values())
