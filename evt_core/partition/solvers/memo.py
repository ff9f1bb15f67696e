"""Dominance memo for branch-and-bound: search states that the future cannot tell apart.

With nodes placed in topological order, the completions of a partial assignment at depth k
(nodes 0..k-1 placed) and their costs depend only on:

* which placed groups hold the *relevant* nodes: placed u with an edge to an unplaced node
  (it decides which in-edges a future node keeps, and only groups with such a member can be
  joined: a group must stay weakly connected through its members) or with u in order[x] for
  an unplaced x (acyclicity tests read grp[u]);
* per such group, the unplaced nodes that may never join it (x with forbid[x] & members);
* the reachability closure among those groups (joins only add quotient edges out of groups of
  order-predecessors, all relevant, so the closure restricted to relevant groups evolves on
  its own and answers every future acyclicity test).

So two states with equal signatures have the same completions, at the same future cost.
When the search leaves a state of signature K entered at cost c with threshold B (the pruning
threshold, i.e. the incumbent's cost, at exit), every completion
of it costs >= B: each was reached (so B <= its cost, thresholds only fall), or pruned under
a threshold >= B. Hence the future cost of K is >= B - c, and a later state of signature K at
cost c' is pruned when c' + (B - c) >= the threshold then. This holds whatever the threshold was
(the threshold only matters through B), so the table is kept for the whole solve. The
signature is canonical (groups numbered by first relevant member)."""
from __future__ import annotations

from ..problem import Problem, bits


OPEN_CACHE_MAX = 1 << 18                         # open_cache entries before it is cleared


class Memo:
    def __init__(self, p: Problem, adj: list[int], max_entries: int = 2_000_000):
        n = p.size
        self.max_entries = max_entries
        self.table: dict = {}
        self.hits = 0
        # rel[k]: relevant placed nodes at depth k, ascending. Invariant: u < k.
        last = [-1] * n                  # last[u]: largest x such that u matters while x is unplaced
        for u in range(n):
            for x in bits(adj[u]):
                if x > u:
                    last[u] = max(last[u], x)
        for x in range(n):
            for u in p.order[x]:
                last[u] = max(last[u], x)
        self.rel = [[u for u in range(k) if last[u] >= k] for k in range(n + 1)]
        # col[i]: nodes x with i in forbid[x], i.e. that may not join a group holding i
        # (what can_join tests; equal to forbid[i] since make_problem builds it symmetric).
        self.col = [0] * n
        for x in range(n):
            for i in bits(p.forbid[x]):
                self.col[i] |= 1 << x
        self.full = (1 << n) - 1
        self.adj = adj
        # open_cache[(members mask, k)]: that group's `_open` set at depth k, a function of
        # the two alone (the static adj and col, and the unplaced nodes k.. of topological
        # placement)
        self.open_cache: dict = {}

    def lookup(self, k: int, cost: int, threshold: int, grp, members, reach):
        """(pruned, key): pruned iff a state of this signature showed that every completion
        from here costs >= threshold. key is for `record` when this state is left."""
        labels: dict[int, int] = {}
        lab = tuple(labels.setdefault(grp[u], len(labels)) for u in self.rel[k])
        fut = self.full & ~((1 << k) - 1)
        sig = [k, lab]
        cache = self.open_cache
        if len(cache) > OPEN_CACHE_MAX:
            cache.clear()
        for s in labels:
            ms = members[s]
            op = cache.get((ms, k))
            if op is None:                   # groups recur across states: 95% hits (merged
                                             # random n=250 seed=1)
                f = 0
                for i in bits(ms):
                    f |= self.col[i]
                op = cache[ms, k] = self._open(ms, fut & ~f)
            r = 0
            for t in bits(reach[s]):
                if t in labels:
                    r |= 1 << labels[t]
            sig.append(op)
            sig.append(r)
        key = tuple(sig)
        future = self.table.get(key)
        if future is not None and cost + future >= threshold:
            self.hits += 1
            return True, key
        return False, key

    def _open(self, members: int, ok: int) -> int:
        """Unplaced nodes that can still join the group: reachable from its members through
        unplaced nodes compatible with it (`ok`). Others could only join as a piece with no
        edge to the group, which `split_connected` turns into a group of its own at the same
        cost, so the future cost depends on this set, not on the whole forbidden mask."""
        seen, frontier = 0, members
        while frontier:
            nxt = 0
            for i in bits(frontier):
                nxt |= self.adj[i]
            frontier = nxt & ok & ~seen
            seen |= frontier
        return seen

    def prunes(self, key, cost: int, threshold: int) -> bool:
        """The test of `lookup` for a key computed earlier (a sibling may have recorded it
        since: two choices for one node can leave indistinguishable states)."""
        future = self.table.get(key)
        return future is not None and cost + future >= threshold

    def record(self, key, future_lb: int) -> None:
        """Every completion of signature `key` costs >= future_lb more than its state."""
        if len(self.table) >= self.max_entries:
            self.table.clear()
        if future_lb > self.table.get(key, -1):
            self.table[key] = future_lb
