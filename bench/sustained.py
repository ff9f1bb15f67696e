"""Time, SM clock and power of each candidate under sustained load:

    python3 -m bench.sustained --rung W2 --shape 8192x3072x768 \\
        --backends 'numba_cuda:sm90_schedule="cooperative",numba_cuda:sm90_schedule="overlap"' [--seconds 1.5] [--rounds 2]

Each candidate of bench.ladder's rung (cuBLAS and the evt backend specs, each checked against the
fp32 reference first, as the ladder does) is called back to back for --seconds while nvidia-smi
samples the SM clock and the board power every 50 ms; rounds interleave the candidates. Prints
µs per call (CUDA events over the whole stretch, no L2 flush) and the median clock and power.
What it answers: whether a kernel runs at the power cap (the clock pulled below its maximum at
the board's limit), where moving work under the tensor cores would not pay, and whether two
kernels run at different clocks. EVT_POISON is lifted while timing (bench.run.unpoisoned).
"""
import argparse
import statistics
import subprocess
import sys
import time

SAMPLE_MS = 50


def parse_samples(text):
    """nvidia-smi's `clocks.sm,power.draw` csv lines (no header, no units) -> [(MHz, W)]; lines it
    could not measure ("[N/A]") are left out."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        try:
            out.append((float(parts[0]), float(parts[1])))
        except (ValueError, IndexError):
            continue
    return out


def steady(samples, settle=4):
    """(median MHz, median W) of the samples after the first `settle` (the clock's ramp)."""
    kept = samples[settle:] or samples
    if not kept:
        return float("nan"), float("nan")
    return statistics.median(s[0] for s in kept), statistics.median(s[1] for s in kept)


def sustained(fn, seconds):
    """(µs per call, MHz, W, samples) of fn called back to back for `seconds`."""
    import torch
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw", "--format=csv,noheader,nounits",
                            "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.2)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        calls, t0 = 0, time.perf_counter()
        start.record()
        while time.perf_counter() - t0 < seconds:
            for _ in range(50):
                fn()
            calls += 50
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
    finally:
        smi.terminate()
        text = smi.communicate(timeout=10)[0]
    samples = parse_samples(text)
    return (1e3 * start.elapsed_time(end) / calls, *steady(samples), len(samples))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bench.sustained", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rung", required=True, help="a bench.ladder rung, e.g. W2")
    ap.add_argument("--shape", required=True, help="MxNxK")
    ap.add_argument("--backends", default="numba_cuda,cupy", help="comma-separated evt backend specs")
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    import torch

    from . import candidates as C
    from .ladder import LADDER
    from .run import evt_backends, unpoisoned
    from .workloads import parse_shape
    if args.rung not in LADDER:
        ap.error(f"unknown rung {args.rung!r}; choose from {list(LADDER)}")
    case = C.Case(LADDER[args.rung], parse_shape(args.shape))
    A, B = case.A, case.B
    case.add(C.Candidate("cuBLAS", "library", lambda: torch.matmul(A, B)),
             outputs_fn=lambda: {"acc": torch.matmul(A, B)}, reference=case.gemm_reference)
    for name, support in evt_backends([b for b in args.backends.split(",") if b]).items():
        case.add_evt_backend(name, support)
    live = [c for c in case.candidates if c.fn is not None and c.mode in ("library", "call")]
    for c in case.candidates:
        print(f"# {c.name} ({c.mode}): {c.status} {c.reason[:200]} {c.kernel}")
    rows = {c.name: [] for c in live}
    with unpoisoned():
        _rounds(live, rows, args)
    print(f"\n{args.rung} {args.shape}, {torch.cuda.get_device_name()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: medians over {args.rounds} rounds\n")
    print("| candidate | µs per call | SM MHz | W |\n|---|---:|---:|---:|")
    for name, v in rows.items():
        print(f"| {name} | {statistics.median(x[0] for x in v):.1f} | {statistics.median(x[1] for x in v):.0f} | "
              f"{statistics.median(x[2] for x in v):.1f} |")
    return 0


def _rounds(live, rows, args):
    for r in range(args.rounds):
        for c in live:
            us, mhz, watts, n = sustained(c.fn, args.seconds)
            rows[c.name].append((us, mhz, watts))
            print(f"round {r} {c.name:50s} {us:8.1f} µs/call  {mhz:5.0f} MHz  {watts:6.1f} W  ({n} samples)", flush=True)


if __name__ == "__main__":
    sys.exit(main())
