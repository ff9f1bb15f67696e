"""GPU benchmark of the fused evt kernels against cuBLAS, eager PyTorch and torch.compile.

    python3 -m bench.run [--backends numba_cuda,cupy] [--shapes 8192x3072x768,...] [--workloads W1,W3]
                         [--rounds 5] [--quick] [--skip-compile] [--budget 330] [--out bench/out]

Writes RESULTS.md, results.json and plot.png into --out (results are rewritten after every case,
so a run cut short still leaves a table). Needs a CUDA GPU, torch and triton; the evt backends
are found through the plugin registry (`evt_core.backends()`).

Method (see README.md): per (workload, shape), every candidate is checked against an fp32
reference and then timed in interleaved rounds (each candidate once per round, the order
rotating), with `triton.testing.do_bench` (median, L2 flushed between repetitions). The H200
runs GEMMs at its power cap and its clock drifts by up to 25% within seconds, so ratios are
taken per round, between candidates timed seconds apart, and the median over rounds reported.
"""
import argparse
import contextlib
import datetime
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
import traceback

from .report import write_results
from .workloads import SHAPES, WORKLOADS, parse_shape

# The numpy backend is the CPU reference interpreter, not a GPU candidate.
CPU_BACKENDS = frozenset({"numpy"})


def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m bench.run", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="", help="comma-separated evt backends (default: every GPU backend registered)")
    p.add_argument("--shapes", default="", help="comma-separated MxNxK (default: the three standard shapes)")
    p.add_argument("--workloads", default="", help=f"comma-separated subset of {','.join(WORKLOADS)}")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 5, --quick 3)")
    p.add_argument("--quick", action="store_true",
                   help="3 rounds, short repetitions, torch.compile on the first shape only")
    p.add_argument("--skip-compile", action="store_true", help="do not run torch.compile (slow to compile)")
    p.add_argument("--budget", type=float, default=330.0,
                   help="seconds: stages that would start past it are skipped and reported (default 330)")
    p.add_argument("--out", default="bench/out", help="output folder (default bench/out)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        args.shapes = [parse_shape(s) for s in args.shapes.split(",") if s] or list(SHAPES)
    except ValueError as e:
        p.error(str(e))
    unknown = [w for w in args.workloads.split(",") if w and w not in WORKLOADS]
    if unknown:
        p.error(f"unknown workload(s) {unknown}; choose from {list(WORKLOADS)}")
    args.workloads = [w for w in args.workloads.split(",") if w] or list(WORKLOADS)
    args.backends = [b for b in args.backends.split(",") if b]
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


class Budget:
    """Wall-clock budget: stages ask before they start, so the run ends on time with every
    skipped stage named, instead of being killed mid-table. The fused kernels come first:
    torch.compile runs only if, after it, every remaining case still fits."""

    def __init__(self, seconds, first_case_guess):
        self.start, self.seconds = time.perf_counter(), seconds
        self.case_seconds = []                  # measured cases, torch.compile time excluded
        self.compile_seconds = {}               # shape -> measured torch.compile times
        self.first_case_guess = first_case_guess

    def elapsed(self):
        return time.perf_counter() - self.start

    def allows(self, estimate):
        return self.elapsed() + estimate <= self.seconds

    def per_case(self):
        return statistics.median(self.case_seconds) if self.case_seconds else self.first_case_guess

    def per_compile(self, shape):
        """Max-autotune benchmarks the GEMM once per shape (measured on an H200: 19-31 s for the
        first workload at a shape, 4-7 s for the next ones), so the estimate is per shape."""
        if self.compile_seconds.get(shape):
            return statistics.median(self.compile_seconds[shape])
        firsts = [times[0] for times in self.compile_seconds.values() if times]
        return max(firsts, default=30.0)

    def why_not_case(self):
        if self.allows(self.per_case()):
            return ""
        return f"time budget: a case takes ~{self.per_case():.0f} s, {self.elapsed():.0f} of {self.seconds:.0f} s used"

    def why_not_compile(self, shape, cases_left):
        need = self.per_compile(shape) + self.per_case() * cases_left
        if self.allows(need):
            return ""
        return (f"time budget: ~{self.per_compile(shape):.0f} s to compile would leave too little for the "
                f"{cases_left} remaining case(s) ({self.elapsed():.0f} of {self.seconds:.0f} s used)")


def evt_backends(wanted):
    """{spec: Support} for the GPU backends to measure; a wanted name that is not registered is
    kept with the reason, so it shows in the table. A spec may carry compile options as
    `name:key=value:key=value` (values parsed as Python literals), to compare variants."""
    import evt_core
    registered = dict(evt_core.backends())
    specs = wanted or sorted(n for n in registered if n not in CPU_BACKENDS)
    from evt_core.backend import Support
    missing = Support(False, f"not registered (registered: {sorted(registered)})")
    return {s: registered.get(split_spec(s)[0], missing) for s in specs}


def split_spec(spec):
    """'cupy:fast_math=True:tile=(128, 256)' -> ('cupy', {'fast_math': True, 'tile': (128, 256)})."""
    name, *pairs = spec.split(":")
    return name, parse_options(pairs)


def parse_options(pairs):
    """["k=v", ...] -> {k: v}: each value a Python literal (True, 256, (128, 256)) where it
    parses as one, else the string."""
    import ast
    options = {}
    for pair in filter(None, pairs):
        key, _, value = pair.partition("=")
        try:
            options[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            options[key] = value
    return options


@contextlib.contextmanager
def unpoisoned():
    """EVT_POISON out of the environment for as long as this lasts: with it, every evt call
    NaN-fills its outputs first (17 µs for a 50 MB output on an H100), which is the checks'
    business (candidates._poisoned), never a timed call's. Put back afterwards."""
    old = os.environ.pop("EVT_POISON", None)
    try:
        yield
    finally:
        if old is not None:
            os.environ["EVT_POISON"] = old


@unpoisoned()
def do_bench(fn, **kwargs):
    """triton.testing.do_bench without EVT_POISON: every timing of the bench goes through here."""
    from triton.testing import do_bench as triton_do_bench
    return triton_do_bench(fn, **kwargs)


def time_interleaved(candidates, rounds, warmup_ms, rep_ms):
    """Each round times every candidate once, rotating the order so no candidate always runs
    right after the (hot) L2 flush of another; appends µs to candidate.round_us."""
    live = [c for c in candidates if c.fn is not None]
    for r in range(rounds):
        for c in live[r % len(live):] + live[:r % len(live)] if live else []:
            if c.fn is None:
                continue
            try:
                c.round_us.append(1e3 * do_bench(c.fn, warmup=warmup_ms, rep=rep_ms, return_mode="median"))
            except Exception as e:  # noqa: BLE001
                c.fail("error", f"timing raised {type(e).__name__}: {e}")
                c.round_us.clear()


@unpoisoned()
def profile_once(candidates):
    """Every live candidate warmed up twice, then called once between cudaProfilerStart and Stop:
    the window `ncu --profile-from-start off` reads counters in (one kernel a candidate)."""
    import torch
    live = [c for c in candidates if c.fn is not None]
    for c in live:
        c.fn()
        c.fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for c in live:
        c.fn()
        torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print("profiled once each: " + ", ".join(c.name for c in live), flush=True)


@unpoisoned()
def time_back_to_back(candidates, calls=20):
    """Host wall time per call, calls issued back to back with no flush: shows per-call host
    overhead (argument binding, allocation, launch) that event timing can hide."""
    import torch
    for c in candidates:
        if c.fn is None:
            continue
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            c.fn()
        torch.cuda.synchronize()
        c.wall_us = 1e6 * (time.perf_counter() - t0) / calls


def environment(argv):
    import torch
    import triton
    versions = {"python": platform.python_version(), "torch": torch.__version__, "cuda (torch)": torch.version.cuda,
                "triton": triton.__version__}
    for mod in ("numpy", "cupy", "numba", "numba_cuda"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:  # noqa: BLE001 - optional
            versions[mod] = "not installed"
    try:
        versions["driver"] = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                            capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception:  # noqa: BLE001
        versions["driver"] = "unknown"
    return {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": torch.cuda.get_device_name(), "command": "python3 -m bench.run " + shlex.join(argv),
            "versions": versions}


def run(args, argv):
    import torch
    warmup_ms, rep_ms = (10, 40) if args.quick else (25, 100)
    backends = evt_backends(args.backends)
    # one do_bench costs about warmup + rep + 150 ms (estimation, flushes); first calls JIT
    timing = args.rounds * (2 + 2 * len(backends)) * (warmup_ms + rep_ms + 150) / 1e3
    budget = Budget(args.budget, first_case_guess=timing + 5.0)
    meta = environment(argv)
    meta.update(rounds=args.rounds, warmup_ms=warmup_ms, rep_ms=rep_ms, budget_s=args.budget)
    results = {"meta": meta, "cases": []}
    plan = [(si, shape, wkey) for si, shape in enumerate(args.shapes) for wkey in args.workloads]
    for index, (si, shape, wkey) in enumerate(plan):
        wl = WORKLOADS[wkey]
        case_json = {"workload": wkey, "title": wl.title, "shape": list(shape), "flops": wl.flops(*shape),
                     "candidates": []}
        results["cases"].append(case_json)
        case_json["skipped"] = budget.why_not_case()
        if case_json["skipped"]:
            continue
        _log(f"{wkey} {shape}: preparing ({budget.elapsed():.0f} s elapsed)")
        try:
            _measure(case_json, wl, shape, si, args, backends, budget, len(plan) - index, (warmup_ms, rep_ms))
        except Exception as e:  # noqa: BLE001 - a harness bug loses one case, not the run
            traceback.print_exc()
            case_json["skipped"] = f"harness error: {type(e).__name__}: {e}"
        torch.cuda.empty_cache()
        write_results(results, args.out)
    write_results(results, args.out, plot=True)
    return results


def _measure(case_json, wl, shape, shape_index, args, backends, budget, cases_left, bench_ms):
    """Build, check and time one case into case_json; feeds the budget's estimates."""
    t0 = time.perf_counter()
    case = _prepare(wl, shape, args, shape_index, backends, budget.why_not_compile(shape, cases_left))
    time_interleaved(case.candidates, args.rounds, *bench_ms)
    time_back_to_back(case.candidates)
    compiled = [c.compile_s for c in case.candidates if c.name == "torch.compile" and c.compile_s]
    budget.compile_seconds.setdefault(shape, []).extend(compiled)
    budget.case_seconds.append(time.perf_counter() - t0 - sum(compiled))
    case_json["candidates"] = [c.to_json() for c in case.candidates]
    case_json["elapsed_s"] = round(budget.elapsed(), 1)
    _log(_summary(case))


def _prepare(wl, shape, args, shape_index, backends, budget_says):
    from .candidates import Case
    case = Case(wl, shape, seed=args.seed)
    if args.skip_compile:
        why = "--skip-compile"
    elif args.quick and shape_index > 0:
        why = "--quick compiles only the first shape"
    else:
        why = budget_says
    case.add_torch_baselines(not why, why)
    for name, support in backends.items():
        case.add_evt_backend(name, support)
    return case


def _summary(case):
    parts = []
    for c in case.candidates:
        t = f"{statistics.median(c.round_us):.1f} us" if c.round_us else c.status
        parts.append(f"{c.name}/{c.mode}={t}")
    return "  " + ", ".join(parts)


def _log(msg):
    print(msg, file=sys.stderr, flush=True)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results = run(args, argv)
    with open(os.path.join(args.out, "RESULTS.md")) as f:
        print(f.read())
    return 0 if results["cases"] else 1


if __name__ == "__main__":
    sys.exit(main())
