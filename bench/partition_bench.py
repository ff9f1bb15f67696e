"""Partitioner benchmark: branch-and-bound vs the original MILP (SciPy/HiGHS) vs greedy, by
graph class, from one run on one machine with the solvers interleaved graph by graph. Every
plan is checked (`plan.check()`) and its cost recomputed from its cut edges. Not a test.

    python bench/partition_bench.py [--limit 10] [--out bench/RESULTS-partition.md]

Classes: small (200 random training-like graphs of 5-30 compute nodes), medium (30 of 40-100),
bert (the BERT-layer joint forward+backward graph at four sizes, raw and after the passes, and
the other examples), large (random graphs of 150-300 nodes: the historical benchmark seeds).
Random graphs hold layer norms (multi-output ops read directly and through getitem)."""
from __future__ import annotations

import argparse
import datetime
import platform
import random
import statistics
import sys
import time

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES, bert_layer
from evt_core.partition.random_graphs import random_graph

SOLVERS = ("bnb", "milp", "greedy")


def classes(small: int, medium: int):
    out = {"small": [], "medium": [], "bert": [], "large": []}
    for k in range(small):
        rng = random.Random(10_000 + k)
        out["small"].append((f"small-{k}", random_graph(rng, rng.randint(5, 30), p_multi=0.05)))
    for k in range(medium):
        rng = random.Random(20_000 + k)
        out["medium"].append((f"medium-{k}", random_graph(rng, rng.randint(40, 100), p_multi=0.05)))
    sizes = [dict(), dict(batch=8, seq=256, hidden=512, heads=8, ffn=2048),
             dict(batch=2, seq=128, hidden=256, heads=4, ffn=1024), dict(batch=16, seq=512, hidden=1024, heads=16, ffn=4096)]
    for kw in sizes:
        g = bert_layer(**kw)
        tag = ",".join(f"{k}={v}" for k, v in kw.items()) or "default"
        out["bert"] += [(f"bert_layer {tag}", g), (f"bert_layer {tag} +passes", P.run_pipeline(g))]
    for name, build in EXAMPLES.items():
        if name != "bert_layer":
            out["bert"] += [(name, build()), (name + " +passes", P.run_pipeline(build()))]
    for n in (150, 200, 250, 300):
        for s in (0, 1):
            out["large"].append((f"random n={n} seed={s}", random_graph(random.Random(1000 * n + s), n)))
    return out


def solve(g, solver, limit):
    t = time.perf_counter()
    plan = P.partition(g, solver=solver, cache=None, time_limit=limit)
    elapsed = time.perf_counter() - t
    plan.check()
    assert plan.cost == P.plan_cost(g, plan.groups)
    return plan, elapsed


def run_class(graphs, limit, log):
    rows = []
    for name, g in graphs:
        res = {s: solve(g, s, limit) for s in SOLVERS}   # interleaved: all solvers per graph
        b, m = res["bnb"][0], res["milp"][0]
        if b.optimal and m.optimal:
            assert b.cost == m.cost, name
        rows.append((name, len(g.compute_nodes()), b.stats.largest_component, res))
        log(name, res)
    return rows


def summary(rows) -> dict:
    tb = [r[3]["bnb"][1] for r in rows]
    tm = [r[3]["milp"][1] for r in rows]
    return dict(graphs=len(rows), nodes=f"{min(r[1] for r in rows)}-{max(r[1] for r in rows)}",
                comp=max(r[2] for r in rows), bnb_med=statistics.median(tb) * 1e3, bnb_max=max(tb) * 1e3,
                milp_med=statistics.median(tm) * 1e3, ratio=statistics.median(tm) / statistics.median(tb),
                bnb_proved=sum(r[3]["bnb"][0].optimal for r in rows),
                milp_proved=sum(r[3]["milp"][0].optimal for r in rows),
                bnb_better=sum(r[3]["bnb"][0].cost < r[3]["milp"][0].cost for r in rows),
                greedy_worse=sum(r[3]["greedy"][0].cost > r[3]["bnb"][0].cost for r in rows))


def table(summ: dict) -> str:
    head = ("| class | graphs | compute nodes | largest comp. | bnb median ms | bnb max ms | HiGHS median ms | "
            "HiGHS / bnb (medians) | bnb proved | HiGHS proved | bnb cheaper than HiGHS | greedy worse than bnb |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "\n".join(
        f"| {c} | {s['graphs']} | {s['nodes']} | {s['comp']} | {s['bnb_med']:.2f} | {s['bnb_max']:.0f} | "
        f"{s['milp_med']:.1f} | {s['ratio']:.0f}× | {s['bnb_proved']}/{s['graphs']} | "
        f"{s['milp_proved']}/{s['graphs']} | {s['bnb_better']} | {s['greedy_worse']} |" for c, s in summ.items())


def detail(rows) -> str:
    out = ["| graph | nodes | largest comp. | bnb cost (B) | bnb proved | bnb ms | bnb search nodes | "
           "HiGHS cost (B) | HiGHS proved | HiGHS ms | greedy cost (B) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, n, comp, res in rows:
        (b, tb), (m, tm), (gr, _) = res["bnb"], res["milp"], res["greedy"]
        out.append(f"| {name} | {n} | {comp} | {b.cost} | {'✓' if b.optimal else '✗'} | {tb * 1e3:.1f} | "
                   f"{b.stats.nodes_explored} | {m.cost} | {'✓' if m.optimal else '✗'} | {tm * 1e3:.1f} | {gr.cost} |")
    return "\n".join(out)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--limit", type=float, default=10.0, help="time limit per solve, seconds")
    ap.add_argument("--small", type=int, default=200)
    ap.add_argument("--medium", type=int, default=30)
    ap.add_argument("--only", default=None, help="comma-separated classes to run")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    start = datetime.datetime.now(datetime.timezone.utc)
    summ, details = {}, {}
    for cls, graphs in classes(args.small, args.medium).items():
        if args.only and cls not in args.only.split(","):
            continue
        rows = run_class(graphs, args.limit, lambda name, res: print(
            cls, name, {s: (r[0].cost, r[0].optimal, round(r[1] * 1e3, 1)) for s, r in res.items()}, flush=True))
        summ[cls], details[cls] = summary(rows), rows
    text = table(summ)
    print(text)
    if args.out:
        cmd = " ".join(["python", "bench/partition_bench.py", *(argv if argv is not None else sys.argv[1:])])
        with open(args.out, "w") as f:
            f.write(f"# Partitioner benchmark\n\nDate: {start:%Y-%m-%d %H:%M} UTC  \nMachine: 2-core CPU "
                    f"({platform.processor() or platform.machine()}), Python {sys.version.split()[0]}  \n"
                    f"Command: `{cmd}`  \nTime limit {args.limit} s per solve; HiGHS runs that hit it count "
                    f"at the time they took (✗ = not proved).\n\n{text}\n")
            for cls, rows in details.items():
                if cls != "small":
                    f.write(f"\n## {cls}\n\n{detail(rows)}\n")


if __name__ == "__main__":
    main()
