"""Branch-and-bound over edge decisions, with probing: the second search of `bnb.solve_bnb`.

The node search (`bnb._Search`) places nodes in topological order; on random n=300 seed=0
(largest component 225 nodes, optimum 41 edges, root bound 36) it did not prove the optimum
in 30 minutes, nor "no plan below 38" in 120 s. The MILP (`cut_milp.py`) proves it in 83
branch-and-bound nodes by branching on edges. This search does the same with the path
packing of `packing.py` as its bound.

A search node fixes some edges *kept* (both ends in one group) or *cut* (ends in different
groups); every legal plan satisfies exactly one full assignment, at cost the cut bytes.

* Classes: the nodes joined by kept edges, closed under convex hulls. A legal group is
  convex (u, w in G and u ~> x ~> w: x outside G gives the quotient cycle G -> grp(x) -> G),
  so every node on an order path between two members of a class is in its group too.
  The classes of a cycle of the class quotient (order relations between classes) merge
  too: the cycle maps onto a closed walk of the plan's quotient, legal only inside a group.
* Infeasible: a forbidden pair in a class or a cut edge inside one.
* Conflicts (pairs of classes never in one group): a forbidden member pair, a cut edge
  between them, or, with A ~> C ~> B in the class quotient, one of those direct conflicts
  between C and A or B (a group holding A and B holds C: otherwise the quotient walk
  A -> .. C .. -> B closes a cycle through C's group).
  An undecided edge between conflicting classes is cut in every completion.
* Bound: cut bytes + those forced cuts + the path packing (`packing.pack_paths`) over the
  remaining undecided edges between classes, with these conflicts; its argument (each path
  between conflicting vertices holds a cut edge; trees and spiders) holds for any vertices
  and any set of true conflicts. A child's bound is at least its parent's (fewer plans).
* Probing (strong branching): for undecided edges e the bounds of both children are
  computed. If both reach the incumbent the node is pruned; if one does, e takes the other
  value for the whole subtree (no plan cheaper than the incumbent has it; the incumbent only
  falls, so this stays true). The search branches on the edge whose weaker child bound is
  highest. At depth < FULL_DEPTH every undecided edge is probed, below only the PROBE best
  by their last scores.

On seed 0 with the optimum as incumbent this proves it in 139 search nodes (17 s on the
benchmark's 2-core machine); the node search stays the first choice: it proves every other
benchmark graph far faster."""
from __future__ import annotations

import time

from ..problem import Problem, bits
from ..union_find import DisjointSets
from .packing import pack_paths

FULL_DEPTH, PROBE = 1, 10
CACHE_MAX = 4096


class EdgeTimeout(Exception):
    pass


class EdgeSearch:
    def __init__(self, p: Problem, best_cost: int, best_groups, deadline=None):
        """best_cost: the incumbent's non-fixed bytes (only cheaper plans are searched)."""
        self.p, n = p, p.size
        self.edges = list(p.edges)
        anc = [0] * n                            # order closure: anc[v] = nodes u ~> v
        for v in range(n):
            for u in p.order[v]:
                anc[v] |= anc[u] | (1 << u)
        desc = [0] * n
        for v in range(n):
            for u in bits(anc[v]):
                desc[u] |= 1 << v
        self.anc, self.desc = anc, desc
        self.best_cost, self.best_groups = best_cost, list(best_groups)
        self.deadline = deadline
        self.explored = 0
        self.status = [0] * len(self.edges)      # 0 undecided, 1 kept, 2 cut: set()
        self.kept = 0                            # mask of the kept edges
        self.cache: dict[int, tuple] = {}        # kept mask -> classes()
        self.score: dict[int, int] = {}          # edge -> its last probe's score

    def set(self, e: int, s: int) -> None:
        self.status[e] = s
        self.kept = self.kept | (1 << e) if s == 1 else self.kept & ~(1 << e)

    def classes(self):
        """(class of each node, {class: members mask}), a class named by its first member:
        the nodes joined by kept edges, merged further until each class is convex (hull) and the class quotient acyclic (the
        classes of a quotient cycle lie on a closed walk of any completion's quotient, so in
        one group). Then the quotient is a DAG. Cached by the kept edges (a probe's cut child
        has its parent's classes)."""
        hit = self.cache.get(self.kept)
        if hit is not None:
            return hit
        if len(self.cache) > CACHE_MAX:
            self.cache.clear()
        self.cache[self.kept] = out = self._classes()
        return out

    def _classes(self):
        n, sets = self.p.size, DisjointSets(self.p.size)
        find = sets.find
        for e, (u, v, _) in enumerate(self.edges):
            if self.status[e] == 1:
                sets.union(u, v)
        anc, desc, order = self.anc, self.desc, self.p.order
        while True:
            mem: dict[int, int] = {}
            for v in range(n):
                r = find(v)
                mem[r] = mem.get(r, 0) | 1 << v
            changed = False
            for r, m in mem.items():
                if m & (m - 1):
                    d = a = 0
                    for x in bits(m):
                        d |= desc[x]
                        a |= anc[x]
                    for x in bits(d & a & ~m):
                        changed |= sets.union(x, r)
            if changed:
                continue
            succ: dict[int, set] = {r: set() for r in mem}
            for v in range(n):
                rv = find(v)
                for u in order[v]:
                    ru = find(u)
                    if ru != rv:
                        succ[ru].add(rv)
            for comp in _cycles(succ):
                for r in comp[1:]:
                    sets.union(r, comp[0])
                changed = True
            if not changed:
                break
        rep = {r: (m & -m).bit_length() - 1 for r, m in mem.items()}
        return [rep[find(v)] for v in range(n)], {rep[r]: m for r, m in mem.items()}

    def evaluate(self, need=None):
        """None if the node is infeasible, else (bound on the bytes still to cut, undecided
        (edge, class, class) list, residual capacity per undecided edge, class of each node).
        `need`: the packing may stop once the bound reaches it."""
        cls, members = self.classes()
        p, n = self.p, self.p.size
        # Masks over class names (first members). A node mask f names the classes it meets:
        # single-member classes directly, the others looked up.
        single, multi = 0, []
        for c, ms in members.items():
            if ms & (ms - 1):
                multi.append((c, ms))
            else:
                single |= ms
        F = [0] * n                              # F[c]: classes in conflict with c (direct)
        forbid = p.forbid
        for c, ms in members.items():
            f = 0
            x = ms
            while x:
                low = x & -x
                f |= forbid[low.bit_length() - 1]
                x ^= low
            if f & ms:
                return None
            fc = f & single
            for d, md in multi:
                if f & md:
                    fc |= 1 << d
            F[c] = fc
        for e, (u, v, _) in enumerate(self.edges):
            if self.status[e] == 2:
                a, b = cls[u], cls[v]
                if a == b:
                    return None
                F[a] |= 1 << b
                F[b] |= 1 << a
        succ, pred, indeg = [0] * n, [0] * n, [0] * n
        for v in range(n):
            cv = cls[v]
            for u in p.order[v]:
                cu = cls[u]
                if cu != cv and not succ[cu] >> cv & 1:
                    succ[cu] |= 1 << cv
                    pred[cv] |= 1 << cu
                    indeg[cv] += 1
        topo = [c for c in members if indeg[c] == 0]
        for c in topo:                           # all of them: `classes` left a DAG
            for d in bits(succ[c]):
                indeg[d] -= 1
                if indeg[d] == 0:
                    topo.append(d)
        conf = F[:]
        for seq, nxt in ((reversed(topo), succ), (topo, pred)):
            # R[c]: classes reachable from c (the reverse quotient on the second pass);
            # H[c]: B with c ~> C ~> B and C in conflict with B (C != B)
            R, H = [0] * n, [0] * n
            for c in seq:
                r = h = 0
                for d in bits(nxt[c]):
                    r |= R[d] | (1 << d)
                    h |= H[d] | (F[d] & R[d])
                R[c], H[c] = r, h
                conf[c] |= h
        forced, und = 0, []
        for e, (u, v, w) in enumerate(self.edges):
            a, b = cls[u], cls[v]
            if a == b or self.status[e]:
                continue
            if conf[a] >> b & 1 or conf[b] >> a & 1:
                forced += w
            else:
                und.append((e, a, b, w))
        adj: dict[int, list] = {}
        cap, ends = [], []
        for i, (_, a, b, w) in enumerate(und):
            cap.append(w)
            ends.append(a ^ b)
            adj.setdefault(a, []).append((b, i))
            adj.setdefault(b, []).append((a, i))
        cf = {x: c for x in adj if (c := conf[x])}
        lb = pack_paths(adj, cap, ends, cf, None if need is None else need - forced, spiders=True)
        return lb + forced, und, cap, cls

    def run(self) -> bool:
        """Search to the end (True: no plan cheaper than the incumbent is left) or the
        deadline (EdgeTimeout)."""
        self.rec(0, 0, 0)
        return True

    def _tick(self) -> None:
        if self.deadline is not None and time.perf_counter() > self.deadline:
            raise EdgeTimeout

    def rec(self, cost: int, depth: int, parent_lb: int) -> None:
        """Search the node whose fixed edges cut `cost` bytes; parent_lb bounds its plans."""
        self.explored += 1
        self._tick()
        fixed = []
        try:
            while True:
                r = self.evaluate(self.best_cost - cost)
                if r is None:
                    return
                more, und, cap, cls = r
                if not und:                      # a plan: the bound is its cost
                    if cost + more < self.best_cost:
                        self._leaf(cls, cost + more)
                    return
                lb = max(cost + more, parent_lb)
                if lb >= self.best_cost:
                    return
                probe = self._probe(cost, depth, lb, und, fixed)
                if probe is None:
                    return
                cost, choice, changed = probe
                if not changed:
                    break
            w = self.edges[choice][2]
            self.set(choice, 2)
            self.rec(cost + w, depth + 1, lb)
            self.set(choice, 1)
            self.rec(cost, depth + 1, lb)
            self.set(choice, 0)
        finally:
            for e in fixed:
                self.set(e, 0)

    def _probe(self, cost, depth, lb, und, fixed):
        """Probe candidate edges (module docstring): None if the node is pruned, else (cost
        after the fixings, edge to branch on, whether anything was fixed)."""
        score = self.score
        cands = sorted((e for e, _, _, _ in und), key=lambda e: -score.get(e, 1 << 60))
        if depth >= FULL_DEPTH:
            cands = cands[:PROBE]
        best, changed = None, False
        for e in cands:
            if self.status[e]:
                continue
            self._tick()
            w = self.edges[e][2]
            self.set(e, 1)
            rk = self.evaluate(self.best_cost - cost)
            self.set(e, 2)
            rc = self.evaluate(self.best_cost - cost - w)
            self.set(e, 0)
            lk = self.best_cost if rk is None else max(cost + rk[0], lb)
            lc = self.best_cost if rc is None else max(cost + w + rc[0], lb)
            score[e] = 4 * min(lk, lc) + max(lk, lc) - 5 * lb
            if lk >= self.best_cost and lc >= self.best_cost:
                return None
            if lk >= self.best_cost or lc >= self.best_cost:
                self.set(e, 2 if lk >= self.best_cost else 1)
                fixed.append(e)
                if self.status[e] == 2:
                    cost += w
                changed = True
                continue
            key = (min(lk, lc), max(lk, lc))
            if best is None or key > best[0]:
                best = (key, e)
        if best is None and not changed:
            best = (None, und[0][0])
        return cost, (None if best is None else best[1]), changed

    def _leaf(self, cls, cost: int) -> None:
        """Every edge decided: the classes are a legal plan (evaluate found no conflict in a
        class and no quotient cycle) cutting `cost` bytes."""
        groups: dict[int, list] = {}
        for v, c in enumerate(cls):
            groups.setdefault(c, []).append(v)
        self.best_cost, self.best_groups = cost, [tuple(g) for g in groups.values()]


def _cycles(succ: dict) -> list[list]:
    """The strongly connected components of more than one vertex of the graph `succ`
    (vertex -> set of successors), by Tarjan's algorithm without recursion."""
    index, low, on, stack, out = {}, {}, set(), [], []
    for root in succ:
        if root in index:
            continue
        work = [(root, iter(succ[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[v])
                if low[v] == index[v]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == v:
                            break
                    if len(comp) > 1:
                        out.append(comp)
            elif w not in index:
                index[w] = low[w] = len(index)
                stack.append(w)
                on.add(w)
                work.append((w, iter(succ[w])))
            elif w in on:
                low[v] = min(low[v], index[w])
    return out
