"""Exact branch-and-bound over group assignments (design doc 5.5).

Nodes are placed in topological order; node v either joins an open group it can still be
connected to (through v, the group's members and unplaced nodes) or opens a new one, so each
set partition is visited once (groups are named by their first member). Pruning:

* legality, incrementally (`State.can_join`): forbidden pairs and quotient acyclicity;
* the bound: bytes already cut plus, for every unplaced node v, a lower bound on the bytes of
  its in-edges that will be cut. v ends in one group, so of its placed in-edges it keeps at
  most those from the best group it may join, plus the in-edges from unplaced compatible
  producers; statically it keeps at most a pairwise-compatible set of producers. Each edge
  is counted at its head only, so the per-node bounds add up.

Children are tried heaviest-gain first, after a greedy incumbent, so the optimum is usually
found at the first leaf and the rest of the search is the proof."""
from __future__ import annotations

import sys
import time
from itertools import combinations

from ..problem import Problem, bits
from .packing import pack_bound
from .greedy import _groups, solve_greedy
from .state import Solution, State, cost_of, split_connected


class _Timeout(Exception):
    pass


def solve_bnb(p: Problem, time_limit: float | None = None) -> Solution:
    inc = solve_greedy(p)
    if p.size <= 1:
        return Solution(inc.groups, inc.cost, True, 1, "bnb")
    search = _Search(p, inc, time_limit)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * p.size + 200))
    try:
        search.rec(0, 0)
        proved = True
    except _Timeout:
        proved = False
    finally:
        sys.setrecursionlimit(limit)
    groups = split_connected(p, search.best_groups)
    return Solution(tuple(groups), cost_of(p, groups), proved, search.explored, "bnb")


class _Search:
    def __init__(self, p: Problem, incumbent: Solution, time_limit):
        self.p, self.st = p, State(p)
        self.best_cost = incumbent.cost - p.fixed_cost
        self.best_groups = list(incumbent.groups)
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.explored = 0
        self.adj = [0] * p.size
        for u, v, _ in p.edges:
            self.adj[u] |= 1 << v
            self.adj[v] |= 1 << u
        self.total_in = [sum(w for _, w in ins) for ins in self.st.in_w]
        self.static_loss = [self._static_loss(v) for v in range(p.size)]

    def _static_loss(self, v: int) -> int:
        """In-bytes of v cut in any plan: v keeps at most a pairwise-compatible producer set."""
        ins = [(u, w) for u, w in self.st.in_w[v]]
        if len(ins) > 12:
            return 0
        keep = 0
        for r in range(len(ins), 0, -1):
            for sub in combinations(ins, r):
                us = [u for u, _ in sub]
                if all(not (self.p.forbid[a] >> b & 1) for a, b in combinations(us, 2)):
                    keep = max(keep, sum(w for _, w in sub))
        return self.total_in[v] - keep

    def bound(self, k: int) -> int:
        st, forbid, lb = self.st, self.p.forbid, 0
        und = []
        for v in range(k, self.p.size):
            if not st.in_w[v]:
                continue
            best, free = 0, 0
            per: dict[int, int] = {}
            for u, w in st.in_w[v]:
                s = st.grp[u]
                if s < 0:
                    free += w
                else:
                    per[s] = per.get(s, 0) + w
            for s, w in per.items():
                if w > best and not forbid[v] & st.members[s]:
                    best = w
            L = max(self.total_in[v] - best - free, self.static_loss[v])
            if L > 0:
                lb += L
            else:
                und.extend((u, v, w) for u, w in st.in_w[v])
        return lb, und

    def rec(self, k: int, cost: int) -> None:
        self.explored += 1
        if self.deadline is not None and self.explored % 256 == 0 and time.perf_counter() > self.deadline:
            raise _Timeout
        lb, und = self.bound(k)
        if cost + lb >= self.best_cost:
            return
        if cost + lb + pack_bound(self.p.size, und, self.st.grp, self.st.members, self.p.forbid, k) >= self.best_cost:
            return
        st = self.st
        if k == self.p.size:
            self.best_cost, self.best_groups = cost, _groups(st.grp)
            return
        gains = st.gains(k)
        for s in self._candidates(k, gains):
            if s < len(st.members) and not st.can_join(k, s):
                continue
            token = st.join(k, s)
            self.rec(k + 1, cost + self.total_in[k] - gains.get(s, 0))
            st.undo(token)

    def _candidates(self, v: int, gains: dict[int, int]) -> list[int]:
        """Open groups v could end up connected to, heaviest gain first, and a new group."""
        placed = (1 << v) - 1
        region = frontier = 1 << v
        while frontier:
            nxt = 0
            for i in bits(frontier):
                nxt |= self.adj[i]
            frontier = nxt & ~placed & ~region
            region |= frontier
        touch = 0
        for i in bits(region):
            touch |= self.adj[i]
        groups = {self.st.grp[i] for i in bits(touch & placed)}
        ranked = sorted(groups, key=lambda s: -gains.get(s, 0))
        new = len(self.st.members)
        pos = sum(1 for s in ranked if gains.get(s, 0) > 0)
        return ranked[:pos] + [new] + ranked[pos:]
