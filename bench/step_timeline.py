"""Where a training step's GPU time goes between kernels: one whole-step CUDA-graph replay of a
workload, compiled by each candidate, traced with torch.profiler, as a timeline of every GPU
activity (kernels, memsets, copies) in order with the idle gap before each.

  python3 -m bench.step_timeline --workload bert --kernels cupy,numba_cuda [--eager] [--top 25]

Per candidate it prints the step's span, the time the GPU was busy, the idle time between
activities (split into gaps of under 5 µs, the graph's launch latency, and longer ones), the
count of each activity kind, and the `--top` longest gaps with the activities on either side:
what a step spends outside kernels, and where."""
import argparse
import json
import os
import sys
import tempfile

_KINDS = ("kernel", "gpu_memset", "gpu_memcpy")


def activities(replay):
    """[(start µs, duration µs, kind, name)] of one replay of `replay`, in start order."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    acts = [(float(e["ts"]), float(e.get("dur", 0.0)), e.get("cat"), e.get("name", ""))
            for e in events if e.get("cat") in _KINDS and e.get("ph") == "X"]
    return sorted(acts)


def summary(name, acts, top):
    """Markdown lines for one candidate's timeline."""
    if not acts:
        return [f"## {name}", "", "no GPU activity recorded", ""]
    start, end = acts[0][0], max(t + d for t, d, _, _ in acts)
    busy, gaps, reach = 0.0, [], acts[0][0]
    for i, (t, d, kind, nm) in enumerate(acts):
        if t > reach:
            gaps.append((t - reach, i))
        busy += max(0.0, t + d - max(t, reach))
        reach = max(reach, t + d)
    idle = sum(g for g, _ in gaps)
    short = sum(g for g, _ in gaps if g < 5.0)
    counts = {k: sum(1 for a in acts if a[2] == k) for k in _KINDS}
    lines = [f"## {name}", "",
             f"- span {end - start:.1f} µs, GPU busy {busy:.1f} µs, idle {idle:.1f} µs in {len(gaps)} gaps "
             f"({short:.1f} µs in gaps under 5 µs, {idle - short:.1f} in longer ones)",
             "- activities: " + ", ".join(f"{counts[k]} {k}" for k in _KINDS), "",
             f"| gap µs | before | after (µs) |", "|---:|---|---|"]
    for g, i in sorted(gaps, reverse=True)[:top]:
        prev, nxt = acts[i - 1], acts[i]
        lines.append(f"| {g:.1f} | {prev[3][:60]} ({prev[1]:.1f}) | {nxt[3][:60]} ({nxt[1]:.1f}) |")
    return lines + [""]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workload", default="bert")
    ap.add_argument("--kernels", default="cupy", help="comma-separated evt GPU backends, one candidate each")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--eager", action="store_true", help="also eager's whole-step graph")
    ap.add_argument("--top", type=int, default=20, help="how many of the longest gaps to list")
    args = ap.parse_args(argv)
    import torch

    import evt_core.torch as et
    from bench.train import graphed_step, objective
    from bench.train_workloads import WORKLOADS
    dt = getattr(torch, args.dtype)
    cands = ([("eager", lambda m: m)] if args.eager else []) + [
        (f"evt ({k})", lambda m, k=k: torch.compile(m, backend=et.backend(kernels=k), dynamic=False))
        for k in args.kernels.split(",") if k]
    print(f"# GPU timeline of one {args.workload} {args.dtype} training step (whole-step CUDA graph, "
          f"{torch.cuda.get_device_name()})\n")
    for name, make in cands:
        torch.manual_seed(0)
        model, inputs, loss_fn = WORKLOADS[args.workload].build(False)
        model = model.to("cuda", dt)
        x, *targets = (t.to("cuda") for t in inputs)
        replay, _ = graphed_step(model, make(objective(model, loss_fn)), (x.to(dt), *targets))
        print("\n".join(summary(name, activities(replay), args.top)), flush=True)
        del replay
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
