"""The original's ILP (design doc 5.3), solved with scipy.optimize.milp (HiGHS): the optional
cross-check of branch-and-bound, not the default.

Per problem with n nodes and at most n partitions: x[s,i] (i in s), z[s,e] (edge e internal to
s; one per edge instead of the original's per pair, equivalent since non-edges weigh 0),
y[s,t] (some order edge runs s->t) and potentials pi[s] (Miller-Tucker-Zemlin). Maximise the
internal bytes. Forbidden pairs are x[s,i]+x[s,j] <= 1, the k-th anchor is pinned to partition
k (2.13), empty partitions beyond the anchors are ordered by size (2.8). Connectivity is not in
the model; groups are split into connected pieces afterwards, which changes neither cost nor
legality. Size O(n^2 * |order|) rows, which is why it is slow on large components."""
from __future__ import annotations

import numpy as np

from ..problem import Problem, bits
from .state import Solution, cost_of, split_connected


def solve_milp(p: Problem, time_limit: float | None = None) -> Solution:
    from scipy.optimize import Bounds, LinearConstraint, milp
    from scipy.sparse import coo_matrix

    n, E, anchors = p.size, len(p.edges), p.anchors
    if n <= 1:
        return Solution(((0,),) if n else (), p.fixed_cost, True, 0, "milp")
    S = n
    X = lambda s, i: s * n + i                      # noqa: E731 (index helpers read like the math)
    Z = lambda s, e: S * n + s * E + e              # noqa: E731
    Y = lambda s, t: S * n + S * E + s * S + t      # noqa: E731
    P = lambda s: S * n + S * E + S * S + s         # noqa: E731
    nvar = S * n + S * E + S * S + S
    rows, cols, vals, lo, hi = [], [], [], [], []

    def row(entries, lb, ub):
        r = len(lo)
        for c, v in entries:
            rows.append(r); cols.append(c); vals.append(v)
        lo.append(lb); hi.append(ub)

    for i in range(n):                                              # (2.2)
        row([(X(s, i), 1) for s in range(S)], 1, 1)
    for e, (u, v, _) in enumerate(p.edges):                         # (2.4), (2.5)
        for s in range(S):
            row([(Z(s, e), 1), (X(s, u), -1)], -np.inf, 0)
            row([(Z(s, e), 1), (X(s, v), -1)], -np.inf, 0)
    for v in range(n):                                              # (2.6), (2.7)
        for u in p.order[v]:
            for s in range(S):
                for t in range(S):
                    if s != t:
                        row([(X(s, u), 1), (X(t, v), 1), (Y(s, t), -1)], -np.inf, 1)
    for s in range(S):
        for t in range(S):
            if s != t:
                row([(P(s), 1), (P(t), -1), (Y(s, t), n)], -np.inf, n - 1)
    for i in range(n):                                              # forbidden pairs
        for j in bits(p.forbid[i]):
            if j > i:
                for s in range(S):
                    row([(X(s, i), 1), (X(s, j), 1)], -np.inf, 1)
    for s in range(len(anchors) + 1, S):                            # (2.8) on free partitions
        row([(X(s, i), 1) for i in range(n)] + [(X(s - 1, i), -1) for i in range(n)], -np.inf, 0)
    lb, ub = np.zeros(nvar), np.ones(nvar)
    lb[P(0):], ub[P(0):] = 0, n - 1
    for k, a in enumerate(anchors):                                 # (2.13)
        lb[X(k, a)] = 1
    c = np.zeros(nvar)
    for e, (_, _, w) in enumerate(p.edges):
        for s in range(S):
            c[Z(s, e)] = -w
    A = coo_matrix((vals, (rows, cols)), shape=(len(lo), nvar)).tocsr()
    opts = {"mip_rel_gap": 0.0, **({"time_limit": float(time_limit)} if time_limit else {})}
    res = milp(c, constraints=LinearConstraint(A, lo, hi), integrality=np.ones(nvar),
               bounds=Bounds(lb, ub), options=opts)
    if res.x is None:
        return Solution(tuple((i,) for i in range(n)), cost_of(p, [(i,) for i in range(n)]), False, 0, "milp")
    x = res.x[:S * n].reshape(S, n)
    groups = [tuple(i for i in range(n) if x[s, i] > 0.5) for s in range(S)]
    groups = split_connected(p, [g for g in groups if g])
    return Solution(tuple(groups), cost_of(p, groups), res.status == 0,
                    int(getattr(res, "mip_node_count", 0) or 0), "milp")
