"""Incremental assignment of a problem's nodes to groups, in topological order, with the
legality test for "may v join group s now". Shared by branch-and-bound and greedy.

Quotient acyclicity is kept as a transitive closure over groups (`reach[s]`: mask of groups
reachable from s). Because nodes arrive in topological order, every order-predecessor of v is
already placed, so joining v to s adds only edges T->s, and it closes a cycle iff s already
reaches T. O(#groups) per join."""
from __future__ import annotations

from dataclasses import dataclass

from ..problem import Problem


@dataclass(frozen=True, slots=True)
class Solution:
    groups: tuple[tuple[int, ...], ...]      # local node indices
    cost: int                                 # bytes cut, including the problem's fixed cost
    optimal: bool
    nodes_explored: int = 0
    solver: str = ""


class State:
    def __init__(self, p: Problem):
        self.p = p
        self.grp = [-1] * p.size
        self.members: list[int] = []
        self.reach: list[int] = []
        # weighted predecessor lists: in_w[v] = [(u, bytes)]
        self.in_w = [[] for _ in range(p.size)]
        for u, v, w in p.edges:
            self.in_w[v].append((u, w))

    def can_join(self, v: int, s: int) -> bool:
        if self.p.forbid[v] & self.members[s]:
            return False
        rs = self.reach[s]
        return not any(rs >> self.grp[u] & 1 for u in self.p.order[v] if self.grp[u] != s)

    def join(self, v: int, s: int):
        """Place v in group s (s == len(groups) opens a new group); returns an undo token."""
        token = (v, s, list(self.reach))
        if s == len(self.members):
            self.members.append(0)
            self.reach.append(0)
        self.members[s] |= 1 << v
        self.grp[v] = s
        into = 0
        for u in self.p.order[v]:
            if self.grp[u] != s:
                into |= 1 << self.grp[u]
        if into:
            add = (1 << s) | self.reach[s]
            for x in range(len(self.reach)):
                if into >> x & 1 or self.reach[x] & into:
                    self.reach[x] |= add
        return token

    def undo(self, token) -> None:
        v, s, reach = token
        self.members[s] &= ~(1 << v)
        self.grp[v] = -1
        if not self.members[s]:
            self.members.pop()
        self.reach = reach

    def gains(self, v: int) -> dict[int, int]:
        """Bytes of v's placed in-edges per group: what joining that group keeps internal."""
        out: dict[int, int] = {}
        for u, w in self.in_w[v]:
            s = self.grp[u]
            if s >= 0:
                out[s] = out.get(s, 0) + w
        return out


def split_connected(p: Problem, groups) -> list[tuple[int, ...]]:
    """Split each group into its weakly connected pieces. Cost and legality are unchanged:
    no internal edge joins two pieces, and a path between pieces would leave the (convex)
    group and re-enter it."""
    adj = [0] * p.size
    for u, v, _ in p.edges:
        adj[u] |= 1 << v
        adj[v] |= 1 << u
    out = []
    for grp in groups:
        left = sum(1 << i for i in grp)
        while left:
            seen = frontier = left & -left
            while frontier:
                nxt = 0
                for i in _bits(frontier):
                    nxt |= adj[i]
                frontier = nxt & left & ~seen
                seen |= frontier
            out.append(tuple(_bits(seen)))
            left &= ~seen
    return out


def in_edge_split(st: "State", v: int, forbid_v: int, total_in: int, static_loss: int,
                  blocked_v: int = 0) -> tuple[int, list]:
    """(charge, spare). charge: the bytes of v's in-edges that are cut whichever group v joins:
    all of them but the heaviest share from one placed group v may join (not forbidden with v,
    not in the mask `blocked_v` of groups acyclicity bars it from) and those from still
    unplaced nodes, and at least `static_loss`. Invariant: a lower bound on v's in-edge cut in
    every completion. spare: v's in-edge capacity the charge leaves unused, as (u, v, bytes)
    edges, for the path packing. Why it may be reused: when the charge is
    total - best - free, it is a packing of stars centred on v (two joinable groups conflict,
    v conflicts with a group it may not join) that uses every in-edge of v fully except the
    free ones (unplaced producers) and `best - second` bytes of the best group's, where
    `second` is the next joinable group's share; trees on disjoint capacity add up (packing.py).
    When the static loss is larger the charge is no such packing: spare is empty."""
    free, per, first, spare = 0, {}, {}, []
    for u, w in st.in_w[v]:
        s = st.grp[u]
        if s < 0:
            free += w
            spare.append((u, v, w))
        else:
            per[s] = per.get(s, 0) + w
            first.setdefault(s, u)
    best = second = 0
    top = -1
    for s, w in per.items():
        if not forbid_v & st.members[s] and not blocked_v >> s & 1:
            if w > best:
                best, second, top = w, best, s
            elif w > second:
                second = w
    charge = total_in - best - free
    if charge < static_loss:
        return static_loss, []
    if best > second:
        spare.append((first[top], v, best - second))
    return charge, spare


def cost_of(p: Problem, groups) -> int:
    where = {i: k for k, grp in enumerate(groups) for i in grp}
    return p.fixed_cost + sum(w for u, v, w in p.edges if where[u] != where[v])


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low
