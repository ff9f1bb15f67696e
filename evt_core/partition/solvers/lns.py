"""Large-neighbourhood search: improve a legal plan by re-solving windows of it exactly.

A window W is a union of whole incumbent groups around a random node. Nodes outside W are
*fixed*: the first fixed node of each incumbent label L may join a group of earlier W nodes
of label L that holds no fixed node of another label, or open one (its *home*); every later
fixed node of L joins that home. W nodes branch freely. Invariants this gives:

* the incumbent is one completion (W nodes in their groups, each label's fixed nodes home);
* fixed nodes of different labels never share a group and those of one label always do, so
  an edge between two fixed nodes is cut iff their labels differ: a constant;
* every completion is a legal plan of the whole problem (`State.can_join` still checks it).

The window search (`_Window`) is the branch-and-bound restricted this way, with a bound made
for it: the constant cut of fixed-fixed edges whose head is unplaced, plus the per-node term
(`bnb._Search.bound`) of each unplaced W node's in-edges, plus the in-edges of an unplaced
fixed node from placed W nodes outside its (placed) home: disjoint edge sets. Then the path packing
(`packing.py`) over the in-edges of the unplaced W nodes whose term is 0: small, as W is. The
dominance memo is off: the restriction depends on labels its signatures do not hold.

Why: on the large random graphs the greedy + local-search incumbent is a few cuts above the
optimum, and the exact search spends most of its time finding better plans rather than
proving one (started from the optimum, it proves it 2-3x faster)."""
from __future__ import annotations

import random
import time

from ..problem import Problem, bits
from .packing import pack_bound
from .state import State, in_edge_charge


class NoMemo:
    """A memo that never prunes and records nothing (windows change the problem)."""

    def lookup(self, *args):
        return False, None

    def prunes(self, *args) -> bool:
        return False

    def record(self, *args) -> None:
        pass


def labels(p: Problem, groups) -> list[int]:
    lab = [0] * p.size
    for k, grp in enumerate(groups):
        for i in grp:
            lab[i] = k
    return lab


def group_window(p: Problem, adj: list[int], lab: list[int], seed: int, size: int,
                 rng: random.Random) -> int:
    """Whole incumbent groups, grown from seed's group through neighbouring groups (random
    order) while the union holds at most `size` nodes (at least seed's group)."""
    members: dict[int, int] = {}
    for v, l in enumerate(lab):
        members[l] = members.get(l, 0) | 1 << v
    win, queue, taken = members[lab[seed]], [lab[seed]], {lab[seed]}
    while queue:
        m = members[queue.pop(rng.randrange(len(queue)))]
        nb = 0
        for i in bits(m):
            nb |= adj[i]
        for v in bits(nb & ~win):
            t = lab[v]
            if t not in taken and (win | members[t]).bit_count() <= size:
                taken.add(t)
                win |= members[t]
                queue.append(t)
    return win


def _window_class():
    from .bnb import _Search

    class _Window(_Search):
        """The search of one window; shares the base search's static tables."""

        def __init__(self, base, lab: list[int], win: int, node_limit: int):
            self.__dict__.update(base.__dict__)
            p = self.p
            self.st, self.memo, self.explored = State(p), NoMemo(), 0
            self.best_groups = list(base.best_groups)
            self.node_limit = node_limit
            self.lab = [-1 if win >> v & 1 else lab[v] for v in range(p.size)]
            self.free = [v for v in range(p.size) if win >> v & 1]
            self.first: dict[int, int] = {}             # label -> its first fixed node
            self.labmask: dict[int, int] = {}           # label -> all its nodes (W too)
            for v in range(p.size):
                self.labmask[lab[v]] = self.labmask.get(lab[v], 0) | 1 << v
                if self.lab[v] >= 0:
                    self.first.setdefault(self.lab[v], v)
            self.fixedmask = ((1 << p.size) - 1) & ~win
            self.orig = lab
            suf = [0] * (p.size + 1)                    # suf[k]: fixed-fixed cut, head >= k
            for u, v, w in p.edges:
                if self.lab[u] >= 0 and self.lab[v] >= 0 and lab[u] != lab[v]:
                    suf[v] += w
            for k in range(p.size - 1, -1, -1):
                suf[k] += suf[k + 1]
            self.suf = suf
            # mixed[v]: (producer in W, bytes) of fixed v; cut iff they end in different groups.
            self.mixed = [(v, [(u, w) for u, w in self.st.in_w[v] if self.lab[u] < 0])
                          for v in range(p.size) if self.lab[v] >= 0]
            self.mixed = [(v, ins) for v, ins in self.mixed if ins]

        def _candidates(self, v: int, gains):
            L = self.lab[v]
            if L < 0:
                return super()._candidates(v, gains)
            st, f = self.st, self.first[L]
            if f < v:
                return [st.grp[f]]
            other = self.fixedmask & ~self.labmask[L]
            ok = {st.grp[u] for u in bits(self.labmask[L] & ((1 << v) - 1))}
            ok = [s for s in ok if not st.members[s] & other]
            return sorted(ok, key=lambda s: -gains.get(s, 0)) + [len(st.members)]

        def _lower(self, k: int, cost: int) -> int:
            st, forbid, lb = self.st, self.p.forbid, self.suf[k]
            und = []
            for v in self.free:
                if v < k or not st.in_w[v]:
                    continue
                L = in_edge_charge(st, v, forbid[v], self.total_in[v], self.static_loss[v])
                if L > 0:
                    lb += L
                else:
                    und.extend((u, v, w) for u, w in st.in_w[v])
            for v, ins in self.mixed:                   # fixed v whose home is placed
                if v < k:
                    continue
                f = self.first[self.lab[v]]
                if f < k:
                    home = st.grp[f]
                    lb += sum(w for u, w in ins if u < k and st.grp[u] != home)
            room = self.best_cost - cost - lb
            if room <= 0 or not und:
                return lb
            return lb + pack_bound(self.p.size, und, st.grp, st.members, forbid, k, room)

    return _Window


def improve_lns(search, deadline: float, size: int = 40, budget: int = 3000,
                patience: int = 60, seed: int = 0) -> None:
    """Re-solve windows of `search`'s incumbent (a bnb._Search) until the deadline or
    `patience` windows in a row bring nothing; search.best_* only ever improves, and
    search.explored counts the windows' nodes."""
    from .bnb import _Timeout
    Window = _window_class()
    p, rng, stale = search.p, random.Random(seed), 0
    while stale < patience and time.perf_counter() < deadline:
        lab = labels(p, search.best_groups)
        win = group_window(p, search.adj, lab, rng.randrange(p.size), size, rng)
        w = Window(search, lab, win, budget)
        w.deadline = deadline
        try:
            w.rec(0, 0)
        except _Timeout:
            pass
        search.explored += w.explored
        if w.best_cost < search.best_cost:
            search.best_cost, search.best_groups = w.best_cost, w.best_groups
            stale = 0
        else:
            stale += 1
