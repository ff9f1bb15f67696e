"""Certify the optima of the benchmark's large graphs: per graph, its largest component is solved
by branch-and-bound (with the limit the benchmark gives it) and by the compact MILP
(`solvers/cut_milp.py`, SciPy/HiGHS), with and without acyclicity. Costs are in units of the
component's largest common edge weight, without the always-cut (fixed) edges, the units the
search counts in. Not a test.

    python bench/partition_optimum.py [--limit 10] [--milp-limit 600] [--out FILE]

Reading: "root bound" is the search's lower bound before any branching, "optimum" the MILP's
proved optimum, "multicut" the optimum with forbidden pairs only (no acyclicity): the share
of the root gap (optimum - root bound) that acyclicity causes is optimum - multicut."""
from __future__ import annotations

import argparse
import time
from math import gcd

from evt_core.partition.problem import decompose, make_problem
from evt_core.partition.solvers.bnb import _Search, solve_bnb
from evt_core.partition.solvers.cut_milp import solve_cut_milp
from evt_core.partition.solvers.lns import labels
from evt_core.partition.solvers.local import legal
from evt_core.partition.solvers.packing import pack_bound
from partition_bench import classes


def largest_problem(g):
    d = decompose(g)
    return make_problem(g, d, tuple(max(d.components, key=len)))


def root_bound(p) -> int:
    """The search's bound before any branching, in full: the packing without early stop
    (need=None), with the second cuts the search only tries one edge from pruning."""
    s = _Search(p, [tuple(range(p.size))], 1 << 62, None)
    lb, und = s.bound(0)
    return lb + pack_bound(p.size, und, s.st.grp, s.st.members, p.forbid, 0, None, s.blocked,
                           spiders=True)


def row(name, p, limit, milp_limit) -> str:
    unit = 0
    for _, _, w in p.edges:
        unit = gcd(unit, w)
    u = lambda b: f"{(b - p.fixed_cost) / unit:g}"        # noqa: E731
    t = time.perf_counter()
    b = solve_bnb(p, limit)
    tb = time.perf_counter() - t
    t = time.perf_counter()
    groups, cost, proved = solve_cut_milp(p, milp_limit)
    tm = time.perf_counter() - t
    assert groups is None or legal(p, labels(p, groups))
    _, relaxed, ok = solve_cut_milp(p, milp_limit, acyclic=False)
    return (f"| {name} | {p.size} | {len(p.edges)} | {root_bound(p) / unit:g} | {u(b.cost)} | "
            f"{'✓' if b.optimal else '✗'} | {tb:.1f} | {u(cost) if cost is not None else '-'} | "
            f"{'✓' if proved else '✗'} | {tm:.1f} | {u(relaxed) if ok else '-'} |")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=float, default=10.0, help="branch-and-bound limit, seconds")
    ap.add_argument("--milp-limit", type=float, default=600.0, help="MILP limit, seconds")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    lines = ["| graph | comp. nodes | edges | root bound | bnb plan | bnb proved | bnb s | optimum "
             "(MILP) | MILP proved | MILP s | multicut (no acyclicity) |", "|" + "---|" * 11]
    for name, g in classes(0, 0)["large"]:
        lines.append(row(name, largest_problem(g), args.limit, args.milp_limit))
        print(lines[-1], flush=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
