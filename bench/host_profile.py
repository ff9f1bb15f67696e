"""Where the host time of a tiny call goes: `python3 -m bench.host_profile [--calls 2000]
[--backends numba_cuda,cupy] [--top 25]`. The same call as bench.launch_overhead (128^3 fp16,
bias + ReLU, torch tensors), run under cProfile after a warm-up; prints each backend's functions
by their own time. cProfile inflates Python frames, so read shares, not absolute microseconds.

`--cpu-stub` needs no GPU: the cupy backend's repeated call with its device parts stood in for
(bench/cpu_stub.py), autotuned (the default options), with autotune=False, and autotuned with
the last 6 results kept (new output pointers every call), timed in interleaved windows of
`--window` calls (`--rounds` each; min and median µs per call: on a shared machine read the
min), then profiled. It says whether every timed call took the prepared launch (no CuPy launch,
no bind)."""
import argparse
import cProfile
import io
import pstats
import time
from collections import deque


def profile_text(fn, calls, top):
    """cProfile `calls` calls of fn: the `top` functions by own time, as text."""
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def cpu_stub(args):
    from bench import cpu_stub as stub
    from bench.launch_overhead import tiny_problem
    with stub.stubbed() as cp:
        A, B, bias, tree = tiny_problem(stub.tensor)
        auto, fixed, kept = stub.compile_cupy(tree), stub.compile_cupy(tree, autotune=False), deque(maxlen=6)
        calls = {"cupy": lambda: auto(A, B, bias=bias), "cupy autotune=False": lambda: fixed(A, B, bias=bias),
                 # a caller that keeps its results: new output pointers on every call
                 "cupy, 6 results kept": lambda: kept.append(auto(A, B, bias=bias))}
        for fn in calls.values():
            for _ in range(50):
                fn()
        launched = len(cp.launches)
        times = {label: [] for label in calls}
        for _ in range(args.rounds):
            for label, fn in calls.items():
                t = time.perf_counter_ns()
                for _ in range(args.window):
                    fn()
                times[label].append((time.perf_counter_ns() - t) / args.window / 1e3)
        print(f"{'call (cpu stub)':25s} {'min us':>7s} {'median':>7s}   ({args.rounds} interleaved windows of "
              f"{args.window} calls; prepared launch every time: {len(cp.launches) == launched})")
        for label, ts in times.items():
            ts.sort()
            print(f"{label:25s} {ts[0]:7.2f} {ts[len(ts) // 2]:7.2f}")
        for label, fn in calls.items():
            print(f"===== {label} (cProfile, {args.calls} calls)\n{profile_text(fn, args.calls, args.top)}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--backends", default="numba_cuda,cupy")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--cpu-stub", action="store_true")
    ap.add_argument("--window", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=300)
    args = ap.parse_args(argv)
    if args.cpu_stub:
        return cpu_stub(args)
    import torch

    import evt_core
    from bench.launch_overhead import tiny_problem
    A, B, bias, tree = tiny_problem()
    for name in args.backends.split(","):
        kernel = evt_core.compile(tree, backend=name)
        for _ in range(50):
            kernel(A, B, bias=bias)
        torch.cuda.synchronize()
        text = profile_text(lambda: kernel(A, B, bias=bias), args.calls, args.top)
        torch.cuda.synchronize()
        print(f"===== {name}: {kernel.run.__self__.stages.get('sm90', '') if hasattr(kernel.run, '__self__') else ''}")
        print(text)


if __name__ == "__main__":
    main()
