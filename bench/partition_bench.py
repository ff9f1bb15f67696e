"""Partitioner benchmark: solve time, search nodes and proved optimality for bnb vs milp vs
greedy on the example graphs and on random graphs. Not a test.

    python bench/partition_bench.py [--limit 10] [--seeds 2] [--out bench/RESULTS-partition.md]
"""
from __future__ import annotations

import argparse
import datetime
import random
import statistics
import sys
import time

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES
from evt_core.partition.random_graphs import random_graph


def graphs(seeds: int):
    for name, build in EXAMPLES.items():
        g = build()
        yield name, g
        yield name + " +passes", P.run_pipeline(g)
    for n in (10, 25, 50, 100, 200):
        for s in range(seeds):
            yield f"random n={n} seed={s}", random_graph(random.Random(1000 * n + s), n)


def solve(g, solver, limit):
    t = time.perf_counter()
    plan = P.partition(g, solver=solver, cache=None, time_limit=limit)
    plan.check()
    return plan, time.perf_counter() - t


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=float, default=10.0, help="time limit per solve, seconds")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    rows, speedups, agree = [], [], []
    for name, g in graphs(args.seeds):
        res = {s: solve(g, s, args.limit) for s in ("bnb", "milp", "greedy")}
        (b, tb), (m, tm), (gr, tg) = res["bnb"], res["milp"], res["greedy"]
        same = "yes" if b.cost == m.cost else ("bnb better" if b.cost < m.cost else "MILP better")
        if b.optimal and m.optimal:
            agree.append(b.cost == m.cost)
        speedups.append(tm / max(tb, 1e-6))
        rows.append(f"| {name} | {len(g.compute_nodes())} | {b.stats.largest_component} | {b.cost} | "
                    f"{'✓' if b.optimal else '✗'} | {tb * 1e3:.1f} | {b.stats.nodes_explored} | {m.cost} | "
                    f"{'✓' if m.optimal else '✗'} | {tm * 1e3:.1f} | {gr.cost} | {tg * 1e3:.1f} | {same} |")
        print(rows[-1], flush=True)
    head = ["| graph | nodes | largest comp. | bnb cost (B) | bnb proved | bnb ms | bnb search nodes | "
            "milp cost (B) | milp proved | milp ms | greedy cost (B) | greedy ms | bnb = milp |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    summary = (f"\nMedian MILP/bnb time ratio: {statistics.median(speedups):.1f}x; "
               f"bnb and MILP agree on {sum(agree)}/{len(agree)} graphs where both proved optimality.\n")
    text = "\n".join(head + rows) + "\n" + summary
    print(summary)
    if args.out:
        with open(args.out, "w") as f:
            f.write(f"# Partitioner benchmark\n\nDate: {datetime.date.today()}  \nMachine: 2-core CPU dev "
                    f"machine  \nCommand: `python bench/partition_bench.py --limit {args.limit} --seeds "
                    f"{args.seeds} --out {args.out}`  \nPython {sys.version.split()[0]}; time limit "
                    f"{args.limit} s per solve (✗ = stopped at the limit, best plan so far).\n\n{text}")


if __name__ == "__main__":
    main()
