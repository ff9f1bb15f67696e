"""Exact branch-and-bound over group assignments (design doc 5.5).

Nodes are placed in topological order; node v either joins an open group it can still be
connected to (through v, the group's members and unplaced nodes) or opens a new one, so each
set partition is visited once (groups are named by their first member). Pruning:

* legality, incrementally (`State.can_join`): forbidden pairs and quotient acyclicity;
* the bound, bytes already cut plus two parts over disjoint sets of undecided edges:
  - per node: for every unplaced node v, a lower bound on the bytes of its in-edges that will
    be cut. v ends in one group, so of its placed in-edges it keeps at most those from the
    best group it may join, plus the in-edges from unplaced compatible producers; statically
    it keeps at most a pairwise-compatible set of producers. Each edge is counted at its head.
  - path packing (`packing.py`) over the in-edges of the nodes whose term above is 0: paths
    between two placed groups, or between forbidden pairs, each need a cut edge; one edge
    short of pruning, packed paths that grow into odd spiders count a second cut
    (`spiders.py`).
  The packing is only computed when the cheap part does not prune already. Both parts also
  use the groups a node can never join without a quotient cycle (`precede.py`).
* dominance (`memo.py`): states the future cannot tell apart (same relevant groups, their
  forbidden future nodes and reachability) are searched once per cost level.

The incumbent is the greedy plan improved by local search (`local.py`); every new leaf is
improved the same way. On problems of LNS_MIN_SIZE+ nodes, windows of the incumbent are
first re-solved exactly (`lns.py`), and a search over edge decisions (`edges.py`) takes over
where this one is slow (`_phases`). Children are bounded first and searched cheapest (cost +
bound) first, below the incumbent. (Iterative deepening from the root bound, tried before,
proved the same plans 2-10x slower on the benchmark's medium graphs: each round re-searches the
tree, and the memo recovers only part of it.)"""
from __future__ import annotations

import sys
import time
from itertools import combinations

from ..problem import Problem, bits
from .greedy import _groups, solve_greedy
from .floors import break_cycles, floored_lower
from .local import improve
from .edges import EdgeSearch, EdgeTimeout
from .lns import improve_lns
from .memo import Memo
from .packing import pack_bound
from .precede import blocked_groups
from .state import Solution, State, cost_of, in_edge_split, split_connected


class _Timeout(Exception):
    pass


def solve_bnb(p: Problem, time_limit: float | None = None, floors=None, seed=None) -> Solution:
    """floors: a `floors.Floors` for a problem that merges solved components (driver); seed:
    their plans' union (groups of p, maybe cyclic), a second incumbent once made legal."""
    inc = solve_greedy(p)
    if p.size <= 1:
        return Solution(inc.groups, inc.cost, True, 1, "bnb")
    groups = improve(p, inc.groups)
    if seed is not None:
        other = improve(p, break_cycles(p, seed))
        if cost_of(p, other) < cost_of(p, groups):
            groups = other
    search = _Search(p, groups, cost_of(p, groups), time_limit, floors)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 4 * p.size + 2 * len(p.edges) + 200))
    try:
        proved = _phases(search, time_limit)
    finally:
        sys.setrecursionlimit(limit)
    groups = split_connected(p, search.best_groups)
    return Solution(tuple(groups), cost_of(p, groups), proved, search.explored, "bnb")


# Problems below LNS_MIN_SIZE nodes are searched plainly to the end (on the medium graphs
# windows cost more than they save: medium-4, 73 nodes, 7.4 s plain, 8.4 s with them).
# Larger ones first improve the incumbent by windows (lns.py) until LNS_PATIENCE windows in a
# row bring nothing or LNS_SHARE of the limit (at most LNS_MAX_S) is spent, then search: it
# proves a good incumbent far faster than it finds one (random n=200 seed=1: 1.5 s from the
# optimum, 13.5 s from the local-search plan). The node search then gets NODE_SHARE of the
# time left (NODE_BUDGET search nodes without a limit), the edge search (`edges.py`) the
# rest, from the node search's incumbent. The node search's work grows steeply with the
# root gap (incumbent - root bound): on random n=300 seed=0 (root bound 36 edges, optimum
# 41) "no plan below 37" took it 3.6 s, "below 38" more than 120 s, the optimum more than
# 30 min; from the optimum the edge search proves it in 17 s (from 42, the windows' plan,
# in 50 s: the node search finds 41 first). Every other benchmark graph, root gap at most
# one edge, the node search proves in under 2 s.
LNS_MIN_SIZE, LNS_PATIENCE, LNS_SHARE, LNS_MAX_S = 100, 10, 0.2, 2.0
NODE_SHARE, NODE_BUDGET = 0.3, 20_000


def _phases(search, time_limit) -> bool:
    """Run the search to a proof or the deadline; True iff proved."""
    if search.p.size < LNS_MIN_SIZE:
        return _search_until(search, search.deadline)
    span = LNS_MAX_S if time_limit is None else min(LNS_MAX_S, LNS_SHARE * time_limit)
    improve_lns(search, time.perf_counter() + span, patience=LNS_PATIENCE)
    deadline = search.deadline
    if deadline is None:
        search.node_limit = search.explored + NODE_BUDGET
        if _search_until(search, None):
            return True
    else:
        now = time.perf_counter()
        if _search_until(search, now + NODE_SHARE * (deadline - now)):
            return True
    edge = EdgeSearch(search.p, search.best_cost, search.best_groups, deadline)
    try:
        edge.run()
        proved = True
    except EdgeTimeout:
        proved = False
    if edge.best_cost < search.best_cost:
        search.best_cost, search.best_groups = edge.best_cost, edge.best_groups
    return proved


def _search_until(search, deadline) -> bool:
    """Search from the root until done (True) or `deadline` (False)."""
    search.deadline = deadline
    try:
        search.rec(0, 0)
        return True
    except _Timeout:
        return False


class _Search:
    def __init__(self, p: Problem, groups, cost: int, time_limit, floors=None):
        self.p, self.st = p, State(p)
        self.best_cost = cost - p.fixed_cost          # the search counts non-fixed bytes only
        self.best_groups = list(groups)
        self.deadline = None if time_limit is None else time.perf_counter() + time_limit
        self.explored = 0
        self.adj = [0] * p.size
        for u, v, _ in p.edges:
            self.adj[u] |= 1 << v
            self.adj[v] |= 1 << u
        self.total_in = [sum(w for _, w in ins) for ins in self.st.in_w]
        self.static_loss = [self._static_loss(v) for v in range(p.size)]
        # first_in[v]: v's earliest producer (p.size if none); static_term: see node_charges
        self.first_in = [min((u for u, _ in ins), default=p.size) for ins in self.st.in_w]
        self.static_term = [self._static(v) for v in range(p.size)]
        self.memo = Memo(p, self.adj)
        self.node_limit = None                        # stop (as on timeout) past this many nodes
        self.gforbid: dict = {}                       # packing's group-forbid cache (packing.py)
        self.floors = floors                          # floors.Floors of a merged problem, or None

    def _charge(self, v: int, w: int) -> None:
        """Keep floors.cut == the bytes cut so far per component (w < 0 undoes)."""
        if self.floors is not None:
            self.floors.add(v, w)

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

    def bound(self, k: int) -> tuple[int, list]:
        """(per-node bound, undecided edge capacity it did not use). Invariant: the bound
        counts only in-edges of nodes >= k, as star packings around each node or its static
        loss (`in_edge_split`), and the returned (u, v, bytes) capacity is what those leave
        unused, so the path packing over it adds to the bound. Side effect:
        self.blocked = blocked_groups(p, st, k), which the packing reuses."""
        lb, und = 0, []
        for _, L, spare in self.node_charges(k):
            lb += L
            und.extend(spare)
        return lb, und

    def node_charges(self, k: int):
        """(v, charge, spare (u, v, bytes) capacity) per unplaced node v with in-edges: the
        terms of `bound`, per node, so `floors` can sum them per component. Nodes whose
        producers are all unplaced (first_in[v] >= k) take their precomputed term (`_static`):
        in_edge_split sees no placed group there, whatever the state."""
        st, forbid, first, static = self.st, self.p.forbid, self.first_in, self.static_term
        self.blocked = blocked = blocked_groups(self.p, st, k)
        out = []
        for v in range(k, self.p.size):
            if first[v] >= k:
                if static[v] is not None:
                    out.append(static[v])
                continue
            L, spare = in_edge_split(st, v, forbid[v], self.total_in[v], self.static_loss[v],
                                     blocked[v])
            out.append((v, L, spare))
        return out

    def _static(self, v: int):
        """node_charges' term of v while none of its producers is placed (None: no in-edges).
        Then in_edge_split's charge is total - free = 0, raised to the static loss, and its
        spare is every in-edge (or none, when the static loss is charged)."""
        ins = self.st.in_w[v]
        if not ins:
            return None
        if self.static_loss[v] > 0:
            return (v, self.static_loss[v], [])
        return (v, 0, [(u, v, w) for u, w in ins])

    def rec(self, k: int, cost: int) -> None:
        """Search the state at depth k (nodes < k placed) entered at cost `cost`."""
        self._tick()
        st = self.st
        pruned, key = self.memo.lookup(k, cost, self.best_cost, st.grp, st.members, st.reach)
        if pruned:
            return
        if cost + self._lower(k, cost) < self.best_cost:
            self._expand(k, cost)
        self.memo.record(key, self.best_cost - cost)   # not reached on timeout

    def _tick(self) -> None:
        self.explored += 1
        if self.deadline is not None and self.explored % 16 == 0 and time.perf_counter() > self.deadline:
            raise _Timeout
        if self.node_limit is not None and self.explored > self.node_limit:
            raise _Timeout

    def _lower(self, k: int, cost: int) -> int:
        """A lower bound on the future cost of the current state; once it reaches the room
        left under the threshold the packing stops (any value >= room prunes)."""
        st = self.st
        if self.floors is not None:
            return floored_lower(self, k, cost)
        lb, und = self.bound(k)
        room = self.best_cost - cost - lb             # bytes the packing must find to prune
        if room <= 0:
            return lb
        return lb + pack_bound(self.p.size, und, st.grp, st.members, self.p.forbid, k, room,
                               self.blocked, self.gforbid, spiders=True)

    def _expand(self, k: int, cost: int) -> None:
        """Leaf, or branch on node k's group. Children are bounded first and searched in
        order of cost + bound (ties: heaviest gain first), so good plans come early. On
        return, every completion of this state costs >= self.best_cost (the threshold at
        exit); each child's memo entry is recorded on the same terms."""
        st = self.st
        if k == self.p.size:
            groups = improve(self.p, _groups(st.grp))
            self.best_cost, self.best_groups = cost_of(self.p, groups) - self.p.fixed_cost, groups
            return
        gains, kids = st.gains(k), []
        for rank, s in enumerate(self._candidates(k, gains)):
            if s < len(st.members) and not st.can_join(k, s):
                continue
            c = cost + self.total_in[k] - gains.get(s, 0)
            token = st.join(k, s)
            self._charge(k, c - cost)
            self._tick()
            pruned, key = self.memo.lookup(k + 1, c, self.best_cost, st.grp, st.members, st.reach)
            if not pruned:
                est = c + self._lower(k + 1, c)
                if est >= self.best_cost:
                    self.memo.record(key, self.best_cost - c)
                else:
                    kids.append((est, rank, s, c, key))
            self._charge(k, cost - c)
            st.undo(token)
        kids.sort()
        for est, _, s, c, key in kids:
            if est < self.best_cost and not self.memo.prunes(key, c, self.best_cost):
                token = st.join(k, s)
                self._charge(k, c - cost)
                self._expand(k + 1, c)
                self._charge(k, cost - c)
                st.undo(token)
            self.memo.record(key, self.best_cost - c)

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
