"""Training-step benchmark: evt (torch.compile backend) against eager and torch.compile.

    python3 bench/train.py                      # the GPU run; writes bench/RESULTS-train.md
    python3 bench/train.py --smoke --out /tmp/r.md   # tiny sizes, runs on a CPU (CI)

Per workload and dtype, every candidate (eager; torch.compile max-autotune without and with
CUDA graphs; evt with each kernel backend) is first checked against eager: the gradients of one
step, compared with an fp32 eager step of the same weights, must be as close as eager's own
low-precision gradients are (or within a floor). Every candidate compiles the model together with
its loss (`objective`), so a compiler can fuse the loss and its gradient (the U-turn workloads).
Then one training step (zero_grad, forward, loss, backward; the optimizer excluded) is timed in interleaved rounds, rotating the order,
with triton.testing.do_bench (CUDA events when triton is missing; perf_counter on a CPU), and
the median over rounds is reported. A failing or timed-out candidate is a row with its reason;
stages that would start past --budget are skipped and named.
"""
from __future__ import annotations

import argparse
import ast
import copy
import datetime
import gc
import json
import platform
import re
import signal
import statistics
import sys
import time
import traceback
from contextlib import contextmanager
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))   # `python3 bench/train.py` from a checkout

from bench.run import split_spec  # noqa: E402
from bench.train_workloads import WORKLOADS, _softmax_ce  # noqa: E402

FLOOR = {"float32": 1e-4, "float16": 2e-2, "bfloat16": 4e-2}    # rel. L2 error always accepted


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 bench/train.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes; runs on a CPU (eager and evt only)")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help=f"subset of {','.join(WORKLOADS)}")
    p.add_argument("--kernels", default="auto",
                   help="evt kernel backends, comma-separated (auto, cupy, numba_cuda), each optionally with "
                        "its own options: cupy:a_mn_major_tma=True")
    p.add_argument("--dtypes", default="", help="override every workload's dtypes (float16,bfloat16,float32)")
    p.add_argument("--evt-options", default="", metavar="K=V,...",
                   help="kernel-backend options for the evt candidates, e.g. a_mn_major_tma=True,split_k=8")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--rep-ms", type=float, default=200.0, help="do_bench repetition time per round")
    p.add_argument("--ce-rows", type=int, default=736_392, help="rows of the softmax cross-entropy U-turn")
    p.add_argument("--no-inductor", action="store_true", help="skip torch.compile candidates")
    p.add_argument("--whole-step", action="store_true",
                   help="also time eager, torch.compile (no CUDA graphs) and each evt backend with the whole "
                        "step (forward + backward) captured in one CUDA graph and replayed")
    p.add_argument("--inductor", action="store_true", help="run torch.compile candidates even with --smoke")
    p.add_argument("--only", default="", metavar="REGEX",
                   help="time only the candidates whose names match (eager always runs: its error bounds the check)")
    p.add_argument("--setup-timeout", type=float, default=900.0, help="seconds per candidate compile + check")
    p.add_argument("--budget", type=float, default=3600.0, help="seconds for the whole run")
    p.add_argument("--profile", type=int, default=0, metavar="K",
                   help="after timing, profile 3 steps of every candidate and keep its K costliest GPU kernels")
    p.add_argument("--out", default="bench/RESULTS-train.md")
    p.add_argument("--combine", nargs="+", metavar="JSON", default=None,
                   help="write --out from the .json files of earlier (e.g. per-workload) runs; runs nothing")
    a = p.parse_args(argv)
    a.workloads = [w for w in a.workloads.split(",") if w]
    bad = [w for w in a.workloads if w not in WORKLOADS]
    if bad:
        p.error(f"unknown workload(s) {bad}; choose from {list(WORKLOADS)}")
    a.kernels = [k for k in a.kernels.split(",") if k]
    a.dtypes = [d for d in a.dtypes.split(",") if d]
    try:
        a.evt_options = {k: ast.literal_eval(v) for k, v in (kv.split("=", 1) for kv in a.evt_options.split(",") if kv)}
    except (ValueError, SyntaxError) as e:
        p.error(f"--evt-options: {e}; write K=V pairs with Python literals, e.g. split_k=8,a_mn_major_tma=True")
    return a


class CandidateTimeout(Exception):
    pass


@contextmanager
def time_limit(seconds):
    """SIGALRM bounds a candidate's compile and check (main thread, Unix); elsewhere no limit."""
    if not hasattr(signal, "SIGALRM") or seconds <= 0:
        yield
        return

    def fire(*_):
        raise CandidateTimeout(f"setup took longer than {seconds:.0f} s")
    old = signal.signal(signal.SIGALRM, fire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def candidates(args, device):
    """[(name, make(objective) -> callable objective)]; an objective is x, *targets -> loss,
    the model and its loss together, so a compiler sees the loss (the U-turn workloads fuse it)."""
    import torch
    import evt_core.torch as et
    out = [("eager", lambda m: m)]
    if not args.no_inductor and (not args.smoke or args.inductor):
        out.append(("torch.compile max-autotune (no CUDA graphs)",
                    lambda m: torch.compile(m, mode="max-autotune-no-cudagraphs", dynamic=False)))
        if device == "cuda":
            out.append(("torch.compile max-autotune (CUDA graphs)", lambda m: torch.compile(m, mode="max-autotune", dynamic=False)))
    kernels = ["numpy"] if device == "cpu" else args.kernels
    for spec in kernels:
        # "cupy:a_mn_major_tma=True": per-candidate options (bench.run's spec syntax), on top of
        # --evt-options, so a default and an opt-in candidate are timed in the same rounds
        k, own = split_spec(spec)
        opts = {} if k == "numpy" else {**args.evt_options, **own}
        tag = "".join(f", {n}={v!r}" for n, v in opts.items())
        out.append((f"evt ({k}{tag})", lambda m, k=k, o=opts: torch.compile(
            m, backend=et.backend(kernels=k, **o), dynamic=False)))
        if device == "cuda":
            out.append((f"evt ({k}{tag}, CUDA graphs)", lambda m, k=k, o=opts: torch.compile(
                m, backend=et.backend(kernels=k, cudagraphs=True, **o), dynamic=False)))
    if device == "cuda" and args.whole_step:
        # the same compiled objectives (no per-graph CUDA graphs: captures do not nest), with the
        # whole step captured in one graph by `graphed_step`
        out += [(f"{name} ({WHOLE_STEP})", make) for name, make in out
                if not name.endswith("CUDA graphs)") or "no CUDA graphs" in name]
    if args.only:
        keep = re.compile(args.only)
        out = [(name, make) for name, make in out if name == "eager" or keep.search(name)]
    return out


WHOLE_STEP = "whole-step CUDA graph"


def graphed_step(model, net, inputs):
    """Capture one step (forward + backward) in a CUDA graph, as full-iteration graph training
    does; returns (replay, loss). Gradients are set to None before the capture, so the
    backward allocates them from the graph's pool and every replay writes them anew."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):             # warm-up off the capture: compiles, allocator state
        for _ in range(3):
            step(model, net, inputs, False)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    model.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        loss = net(*inputs)
        loss.backward()

    def replay():
        graph.replay()
    # The graph reads the parameters and inputs at their captured addresses, so the replay holds
    # them: without, a candidate's model died with the timing loop's next candidate, the next
    # capture's empty_cache released its memory, and the replay faulted (illegal address).
    replay.holds = (model, net, inputs)
    return replay, loss


def objective(model, loss_fn):
    """What every candidate compiles: the model and its loss, (x, *targets) -> loss."""
    return lambda x, *targets: loss_fn(model(x), x, *targets)


def step(model, net, inputs, cudagraphs):
    """What is timed: zero_grad, forward, loss, backward."""
    import torch
    model.zero_grad(set_to_none=True)
    if cudagraphs:
        torch.compiler.cudagraph_mark_step_begin()
    loss = net(*inputs)
    loss.backward()
    return loss


def grads_of(model, net, inputs, cudagraphs):
    """One step, then (loss, gradients) as fp32 copies for the check."""
    import torch
    loss = step(model, net, inputs, cudagraphs)
    return loss.detach().float().clone(), [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().float()
                                           .clone() for p in model.parameters()]


def rel_err(got, ref):
    import torch
    num = torch.sqrt(sum(((g - r) ** 2).sum() for g, r in zip(got, ref)))
    den = torch.sqrt(sum((r ** 2).sum() for r in ref))
    return float(num / den.clamp_min(1e-30))


def make_timer(device):
    import torch
    if device == "cpu":
        def cpu_bench(fn, rep_ms):
            fn()
            times, start = [], time.perf_counter()
            while time.perf_counter() - start < rep_ms / 1e3 or len(times) < 3:
                t = time.perf_counter()
                fn()
                times.append((time.perf_counter() - t) * 1e3)
            return statistics.median(times)
        return cpu_bench, "time.perf_counter"
    try:
        from triton.testing import do_bench
        return (lambda fn, rep_ms: do_bench(fn, warmup=25, rep=rep_ms)), "triton.testing.do_bench (median)"
    except ImportError:
        def events(fn, rep_ms):
            fn()
            torch.cuda.synchronize()
            times = []
            for _ in range(max(5, int(rep_ms))):
                s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                s.record(); fn(); e.record(); e.synchronize()
                times.append(s.elapsed_time(e))
            return statistics.median(times)
        return events, "CUDA events (median)"


def run_case(args, wl, dtype_name, device, cands, bench, deadline):
    """One workload at one dtype: rows (dicts) for every candidate."""
    import torch
    import evt_core.torch as et
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    build = partial(_softmax_ce, rows=args.ce_rows) if wl.key == "softmax_ce" else wl.build
    base, inputs, loss_fn = build(args.smoke)
    x, *targets = (t.to(device) for t in inputs)    # the model's input, then the loss's targets
    low = (x.to(dtype), *targets)
    ref_model = copy.deepcopy(base).to(device).float()
    _, ref = grads_of(ref_model, objective(ref_model, loss_fn), (x.float(), *targets), False)
    del ref_model
    rows, live = [], []
    eager_err = None
    for name, make in cands:
        row = {"workload": wl.key, "dtype": dtype_name, "candidate": name, "status": "ok", "ms": None}
        rows.append(row)
        if time.perf_counter() > deadline:
            row["status"] = "skipped: time budget"
            continue
        cudagraphs = "CUDA graphs" in name
        try:
            model = copy.deepcopy(base).to(device=device, dtype=dtype)
            before = len(et.reports())
            t0 = time.perf_counter()
            whole = WHOLE_STEP in name
            with time_limit(args.setup_timeout):
                net = make(objective(model, loss_fn))
                if whole:
                    replay, loss = graphed_step(model, net, low)
                    replay()
                    torch.cuda.synchronize()
                    g = [(p.grad if p.grad is not None else torch.zeros_like(p)).detach().float().clone()
                         for p in model.parameters()]
                    loss = loss.detach().float().clone()
                for _ in range(0 if whole else 2 if cudagraphs else 1):   # graph trees record on a later step
                    loss, g = grads_of(model, net, low, cudagraphs)
            row["setup_s"] = round(time.perf_counter() - t0, 1)
            err = rel_err(g, ref)
            row["rel_err"] = err
            if name == "eager":
                eager_err = err
            bound = max(3 * (eager_err or 0.0), FLOOR[dtype_name])
            if not torch.isfinite(loss) or err > bound:
                row["status"] = f"wrong: gradient rel. L2 error {err:.2e} > {bound:.2e} (eager {eager_err:.2e})"
                continue
            reps = et.reports()[before:]
            if reps:
                row["evt"] = {"graphs": len(reps), "fused": sum(len(r.fused) for r in reps),
                              "gemm_groups": sum(len(r.fused) + len(r.unfused) for r in reps),
                              "bytes_saved": sum(r.bytes_saved for r in reps),
                              "unfused": [f"{r.name} #{k}: {v}" for r in reps for k, v in r.unfused.items()][:6],
                              "rest": sorted({r.rest for r in reps if r.rest})}
            live.append((row, replay if whole else partial(step, model, net, low, cudagraphs)))
        except Exception as e:  # noqa: BLE001 - one candidate's failure is a row, not a crash
            row["status"] = f"failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
            row["trace"] = traceback.format_exc(limit=-4)
    times = {id(r): [] for r, _ in live}
    for rnd in range(args.rounds):
        if time.perf_counter() > deadline:
            break
        order = live[rnd % len(live):] + live[:rnd % len(live)] if live else []
        for row, fn in order:
            try:
                times[id(row)].append(bench(fn, args.rep_ms))
            except Exception as e:  # noqa: BLE001
                row["status"] = f"failed while timing: {type(e).__name__}: {str(e)[:200]}"
    for row, fn in live:
        if times[id(row)] and row["status"] == "ok":
            row["ms"] = statistics.median(times[id(row)])
            row["rounds"] = len(times[id(row)])
        if args.profile and device == "cuda" and row["status"] == "ok":
            row["kernels"], row["gpu_us"] = top_kernels(fn, args.profile)
    return rows


def top_kernels(fn, k):
    """([(kernel name, µs per step, calls per step)] of the k GPU kernels that take the most
    time over 3 profiled steps, µs per step of all GPU kernels): where a candidate's step goes,
    and how much of it the GPU is busy (the rest is launch gaps and host work)."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(3):
            fn()
        torch.cuda.synchronize()
    rows = [(e.key, e.device_time_total / 3, e.count / 3) for e in prof.key_averages() if e.device_time_total > 0]
    rows.sort(key=lambda r: -r[1])
    total = sum(us for _, us, _ in rows)
    return [(name[:90], round(us, 1), round(n, 1)) for name, us, n in rows[:k]], round(total, 1)


def targets(rows):
    """Per case: met when the best evt candidate is at least as fast as eager and as every
    torch.compile candidate that ran; None when there is nothing to compare."""
    out = {}
    for case in dict.fromkeys((r["workload"], r["dtype"]) for r in rows):
        rs = [r for r in rows if (r["workload"], r["dtype"]) == case and r["ms"]]
        evt = [r["ms"] for r in rs if r["candidate"].startswith("evt")]
        others = [r["ms"] for r in rs if not r["candidate"].startswith("evt")]
        out[case] = None if not evt or not others else min(evt) <= min(others)
    return out


def markdown(args, rows, meta) -> str:
    lines = ["# Training-step benchmark (bench/train.py)", "",
             f"- date: {meta['date']}", f"- device: {meta['device']}", f"- command: `{meta['command']}`",
             f"- versions: {meta['versions']}", f"- timing: {meta['timer']}, {args.rounds} interleaved rounds, "
             "median; one step = zero_grad + forward + loss + backward (optimizer excluded)",
             "- check: gradients of one step against an fp32 eager step; accepted within "
             "max(3 × eager's own error, floor " + ", ".join(f"{k} {v:g}" for k, v in FLOOR.items()) + ")",
             "- target: the best evt candidate at least as fast as eager and every torch.compile candidate", ""]
    if args.smoke:
        lines += ["**Smoke run** (tiny sizes" + (", CPU" if meta["device_kind"] == "cpu" else "") +
                  "): checks that every stage runs; the times mean nothing.", ""]
    met = targets(rows)
    lines += ["| workload | dtype | candidate | ms / step | vs eager | rel. grad error | evt fused / GEMM groups | "
              "bytes saved | setup s | status |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        eager = next((e["ms"] for e in rows if (e["workload"], e["dtype"], e["candidate"]) ==
                      (r["workload"], r["dtype"], "eager") and e["ms"]), None)
        ev = r.get("evt")
        lines.append("| " + " | ".join([
            r["workload"], r["dtype"], r["candidate"], f"{r['ms']:.3f}" if r["ms"] else "–",
            f"{eager / r['ms']:.2f}×" if r["ms"] and eager else "–",
            f"{r['rel_err']:.1e}" if "rel_err" in r else "–",
            f"{ev['fused']} / {ev['gemm_groups']}" if ev else "–",
            f"{ev['bytes_saved']:,}" if ev else "–", str(r.get("setup_s", "–")),
            r["status"].replace("|", "/")]) + " |")
    lines += ["", "## Targets", ""]
    for (w, d), ok in met.items():
        lines.append(f"- {w} {d}: " + ("met" if ok else "not met" if ok is False else "not measured"))
    unfused = [(r, u) for r in rows for u in (r.get("evt") or {}).get("unfused", [])]
    if unfused:
        lines += ["", "## GEMM groups that ran as torch ops (first per candidate)", ""]
        lines += [f"- {r['workload']} {r['dtype']} {r['candidate']}: {u}" for r, u in unfused]
    profiled = [r for r in rows if r.get("kernels")]
    if profiled:
        lines += ["", "## Where a step goes: costliest GPU kernels (torch.profiler, 3 steps)", ""]
        for r in profiled:
            busy = f" (all kernels {r['gpu_us']:.0f} µs per step)" if r.get("gpu_us") else ""
            lines += [f"- {r['workload']} {r['dtype']} {r['candidate']}{busy}: " + "; ".join(
                f"`{n}` {us:.0f} µs ×{c:g}" for n, us, c in r["kernels"])]
    failed = [r for r in rows if "trace" in r]
    if failed:
        lines += ["", "## Failures", ""]
        for r in failed:
            lines += [f"### {r['workload']} {r['dtype']} {r['candidate']}", "", "```", r["trace"].strip(), "```", ""]
    return "\n".join(lines) + "\n"


def combine(args) -> int:
    """One table from several runs (each under its own time limit), in the order given."""
    runs = [json.loads(Path(f).read_text()) for f in args.combine]
    meta = dict(runs[0]["meta"])
    meta["command"] = "`; `".join(r["meta"]["command"] for r in runs)
    meta["date"] = ", ".join(dict.fromkeys(r["meta"]["date"] for r in runs))
    meta["device"] = ", ".join(dict.fromkeys(r["meta"]["device"] for r in runs))
    args.rounds = max(r["meta"].get("rounds", args.rounds) for r in runs)
    args.smoke = any(r["meta"].get("smoke") for r in runs)
    rows = [row for r in runs for row in r["rows"]]
    out = Path(args.out)
    out.write_text(markdown(args, rows, meta))
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    print(out.read_text())
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.combine:
        return combine(args)
    import torch
    start = time.perf_counter()
    deadline = start + args.budget
    # Every candidate compiles a fresh copy of the same module classes: each is one more
    # cache entry of the same code objects, and past the default limit (8) dynamo would
    # silently run the rest eagerly.
    torch._dynamo.config.cache_size_limit = max(torch._dynamo.config.cache_size_limit, 256)
    torch._dynamo.config.accumulated_cache_size_limit = max(torch._dynamo.config.accumulated_cache_size_limit, 4096)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu" and not args.smoke:
        print("no CUDA GPU: running the smoke sizes (pass --smoke to say so)", file=sys.stderr)
        args.smoke = True
    bench, timer = make_timer(device)
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": torch.cuda.get_device_name() if device == "cuda" else f"CPU ({platform.processor() or platform.machine()})",
            "device_kind": device, "timer": timer,
            "command": " ".join(["python3", "bench/train.py", *(argv if argv is not None else sys.argv[1:])]),
            "versions": f"torch {torch.__version__}, Python {platform.python_version()}",
            "rounds": args.rounds, "smoke": args.smoke}
    cands = candidates(args, device)
    rows = []
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for key in args.workloads:
        wl = WORKLOADS[key]
        for dt in (["float32"] if device == "cpu" else args.dtypes or list(wl.dtypes)):
            print(f"[{time.perf_counter() - start:7.1f} s] {key} {dt}", file=sys.stderr, flush=True)
            try:
                rows += run_case(args, wl, dt, device, cands, bench, deadline)
            except Exception as e:  # noqa: BLE001 - e.g. out of memory building the inputs
                rows.append({"workload": key, "dtype": dt, "candidate": "(setup)", "ms": None,
                             "status": f"failed: {type(e).__name__}: {str(e)[:200]}",
                             "trace": traceback.format_exc(limit=-4)})
            out.write_text(markdown(args, rows, meta))          # a run cut short still leaves a table
            out.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
            torch._dynamo.reset()           # drop this case's compiled code and CUDA graph pools
            gc.collect()
            if device == "cuda":
                torch.cuda.empty_cache()    # raises if a kernel of this case faulted: the rows are written
    print(out.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
