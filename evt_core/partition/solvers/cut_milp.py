"""A compact MILP for one Problem, to certify optima of large components (SciPy/HiGHS, the
`milp` extra). A cross-check for the benchmark's hard graphs, not a driver solver: the
original's ILP (`milp.py`, O(n^2 |order|) rows) cannot even start on 200+ node components.

Variables: y[e] in {0, 1} (edge e is cut) and a potential pi[v] in [0, n] per node. A plan is
read off y as the connected pieces of the uncut edges (split_connected's groups).

* y[e] = 0  =>  pi[u] = pi[v]; y[e] = 1  =>  pi[v] >= pi[u] + 1, for every edge u -> v:
  pi[u] + y[e] <= pi[v] <= pi[u] + n * y[e]. So a cut edge never joins nodes of one piece.
* order pairs u ~> v that are no edge are forbidden pairs (problem.py: a path through a node
  outside the component, or an edge that can never be internal), so pi[v] >= pi[u] + 1.
  Every quotient edge then raises pi: the quotient is acyclic. Conversely a topological
  numbering of a legal plan's groups is such a pi, so no legal plan is lost.
* forbidden pairs (i, j): every path of edges between them has a cut edge (sum of y >= 1).
  There are too many paths, so a few shortest ones per pair are added at the start and the
  model is re-solved with the path of uncut edges joining any pair that shares a piece
  (lazy constraints) until none does.

With `acyclic=False` the potentials are left out: the optimum of that multicut relaxation
(forbidden pairs only) tells how much of a gap acyclicity accounts for."""
from __future__ import annotations

from collections import deque
from math import gcd

import numpy as np

from ..problem import Problem, bits
from ..union_find import DisjointSets
from .state import cost_of


def solve_cut_milp(p: Problem, time_limit: float = 600.0, acyclic: bool = True,
                   start_paths: int = 3):
    """(groups, cost in bytes with p's fixed cost, proved: bool); (None, None, False) when
    no plan satisfying every forbidden pair came back within time_limit (seconds, all HiGHS
    calls together, each given at least one). proved means HiGHS closed
    the gap and the plan satisfies every forbidden pair, so cost is p's optimum (or, with
    acyclic=False, the multicut relaxation's optimum, a lower bound on it)."""
    import time
    from scipy.optimize import Bounds, LinearConstraint, milp
    deadline = time.perf_counter() + time_limit
    n, E = p.size, len(p.edges)
    if E == 0:
        groups = [(i,) for i in range(n)]
        return groups, cost_of(p, groups), True
    adj = [[] for _ in range(n)]
    for e, (u, v, _) in enumerate(p.edges):
        adj[u].append((v, e))
        adj[v].append((u, e))
    rows = _potential_rows(p, E) if acyclic else []
    pairs = [(i, j) for i in range(n) for j in bits(p.forbid[i]) if j > i]
    paths = {q for i, j in pairs for q in _paths(adj, i, j, set(range(E)), start_paths)}
    unit = 0
    for _, _, w in p.edges:
        unit = gcd(unit, w)
    c = np.array([w / unit for _, _, w in p.edges] + [0.0] * n)
    integrality = np.concatenate([np.ones(E), np.zeros(n)])
    bounds = Bounds(np.zeros(E + n), np.concatenate([np.ones(E), np.full(n, float(n))]))
    while True:
        A, lo, hi = _matrix(rows + [([(e, 1) for e in q], 1, np.inf) for q in paths], E + n)
        res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=integrality, bounds=bounds,
                   options={"time_limit": max(1.0, deadline - time.perf_counter()),
                            "mip_rel_gap": 0.0})
        if res.x is None:
            return None, None, False
        cut = res.x[:E] > 0.5
        groups, piece = _pieces(p, cut)
        uncut = {e for e in range(E) if not cut[e]}
        new = {q for i, j in pairs if piece[i] == piece[j] for q in _paths(adj, i, j, uncut, 1)}
        if not new:
            return groups, cost_of(p, groups), res.status == 0
        if time.perf_counter() > deadline:
            return None, None, False
        paths |= new


def _potential_rows(p: Problem, E: int) -> list:
    """The rows tying pi to y (module docstring); pi[v] is column E + v."""
    n, rows, edge = p.size, [], {(u, v) for u, v, _ in p.edges}
    for e, (u, v, _) in enumerate(p.edges):
        rows.append(([(E + v, 1), (E + u, -1), (e, -1)], 0, np.inf))
        rows.append(([(E + v, 1), (E + u, -1), (e, -n)], -np.inf, 0))
    for v in range(n):
        for u in p.order[v]:
            if (u, v) not in edge:
                if not p.forbid[u] >> v & 1:
                    raise ValueError(f"order pair {u} ~> {v} is neither an edge nor forbidden")
                rows.append(([(E + v, 1), (E + u, -1)], 1, np.inf))
    return rows


def _paths(adj, i: int, j: int, allowed: set, k: int) -> list[frozenset]:
    """Up to k shortest i-j paths (edge sets) over `allowed` edges, each found after banning
    one edge of the previous one, so they differ."""
    out, banned = [], set()
    for _ in range(k):
        prev, todo = {i: None}, deque([i])
        while todo and j not in prev:
            x = todo.popleft()
            for y, e in adj[x]:
                if e in allowed and e not in banned and y not in prev:
                    prev[y] = (x, e)
                    todo.append(y)
        if j not in prev:
            break
        path, x = [], j
        while prev[x] is not None:
            x, e = prev[x]
            path.append(e)
        out.append(frozenset(path))
        banned.add(path[len(path) // 2])
    return out


def _pieces(p: Problem, cut) -> tuple[list[tuple[int, ...]], list[int]]:
    """Connected pieces of the uncut edges, and each node's piece."""
    sets = DisjointSets(p.size)
    for e, (u, v, _) in enumerate(p.edges):
        if not cut[e]:
            sets.union(u, v)
    piece = [sets.find(i) for i in range(p.size)]
    by: dict[int, list[int]] = {}
    for i, r in enumerate(piece):
        by.setdefault(r, []).append(i)
    return [tuple(g) for g in by.values()], piece


def _matrix(rows, ncols: int):
    from scipy.sparse import coo_matrix
    r, c, v, lo, hi = [], [], [], [], []
    for k, (entries, a, b) in enumerate(rows):
        for col, val in entries:
            r.append(k)
            c.append(col)
            v.append(val)
        lo.append(a)
        hi.append(b)
    return coo_matrix((v, (r, c)), shape=(len(rows), ncols)).tocsr(), lo, hi
