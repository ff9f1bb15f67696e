"""Host cost of one call for a tiny problem, where launch overhead is all there is:
`python3 -m bench.launch_overhead [--calls 2000]`. Compares torch.matmul (one cuBLAS launch)
with each GPU backend's `kernel(A, B, **inputs)` on torch tensors (binding, output
allocation and launch included), 128^3 fp16 with a bias + ReLU epilogue.

Back to back, a call's host time includes any wait for room in the launch queue, so it is
max(host cost, GPU time per kernel); the "alone" column times each call into an idle GPU
(synchronized before the clock starts), which is the host cost by itself, and "GPU" is the
kernel's own time from CUDA events around 200 launches captured in one CUDA graph.
Where "back to back" exceeds "alone", the GPU is what limits the repeated call.

The host's clock drifts within seconds, so the rows are timed in `--rounds` interleaved rounds
(each row once per round, in turn) and each column is the median over rounds."""
import argparse
import time

import numpy as np


def per_call_us(fn, calls, torch):
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    host = (time.perf_counter() - t) / calls * 1e6
    torch.cuda.synchronize()
    return host, (time.perf_counter() - t) / calls * 1e6


def alone_us(fn, calls, torch):
    """Host µs of one call made into an idle GPU (median of `calls`)."""
    times = []
    for _ in range(calls):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    torch.cuda.synchronize()
    return float(np.median(times)) * 1e6


def gpu_us(fn, torch, reps=200):
    """GPU µs per call: `reps` calls captured in one CUDA graph, replayed between events (None
    where the call cannot be captured)."""
    try:
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            fn()
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                fn()
        g.replay()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        g.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / reps
    except Exception:      # noqa: BLE001  (a probe: report "n/a", not fail the table)
        return None


def tiny_problem(tensor=None):
    """(A, B, bias, tree) of the probe: 128^3 fp16 torch tensors on the GPU, bias + ReLU.
    tensor(shape, torch dtype) makes the arrays instead (bench.cpu_stub's fakes)."""
    import torch

    import evt_core
    from evt_core import ops
    M = N = K = 128
    tensor = tensor or (lambda shape, dt: torch.randn(*shape, device="cuda", dtype=dt))
    A, B, bias = tensor((M, K), torch.float16), tensor((K, N), torch.float16), tensor((N,), torch.float32)
    tree = evt_core.trace(lambda accum, bias: {"D": ops.relu(accum + bias)},
                          {"accum": np.empty((M, N), np.float32), "bias": np.empty(N, np.float32),
                           "D": np.empty((M, N), np.float16)})
    return A, B, bias, tree


def cupy_tile_rows(tree, A, B, bias):
    """A row per tile the cupy autotuner chooses from, forced: whether a call's host cost depends
    on the kernel it launches (its Python path does not: bench.host_profile --cpu-stub)."""
    import evt_core
    from evt_backends.cupy.select import candidates
    auto = evt_core.compile(tree, backend="cupy")
    auto(A, B, bias=bias)
    rows = []
    for cfg in candidates(tree.program, auto.run.last.spec):
        k = evt_core.compile(tree, backend="cupy", tile=cfg)
        rows.append((f"evt cupy tile={cfg.label()}", lambda k=k: k(A, B, bias=bias)))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=2000, help="calls per row, over all rounds")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    ap.add_argument("--cupy-tiles", action="store_true",
                    help="also a row per candidate tile of the cupy kernel, forced")
    args = ap.parse_args(argv)
    import torch

    import evt_core
    A, B, bias, tree = tiny_problem()
    rows = [("torch.matmul (cuBLAS, no epilogue)", lambda: torch.matmul(A, B))]
    for name, support in sorted(evt_core.backends().items()):
        if name == "numpy" or not support:
            continue
        kernel = evt_core.compile(tree, backend=name)
        rows.append((f"evt {name} kernel(A, B, bias=...)", lambda k=kernel: k(A, B, bias=bias)))
    if args.cupy_tiles:
        rows += cupy_tile_rows(tree, A, B, bias)
    print(f"{'call':45s} {'host us/call':>13s} {'incl. sync':>11s} {'alone':>7s} {'GPU':>6s}   ({args.calls} calls in "
          f"{args.rounds} interleaved rounds, medians; 128^3 fp16, {torch.cuda.get_device_name()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})")
    per_round = max(args.calls // args.rounds, 1)
    samples = {label: [] for label, _ in rows}
    for _ in range(args.rounds):
        for label, fn in rows:
            samples[label].append((*per_call_us(fn, per_round, torch), alone_us(fn, max(per_round // 4, 1), torch)))
    for label, fn in rows:
        host, wall, alone = np.median(np.array(samples[label]), axis=0)
        gpu = gpu_us(fn, torch)
        print(f"{label:45s} {host:13.1f} {wall:11.1f} {alone:7.1f} {'n/a' if gpu is None else f'{gpu:.1f}':>6s}")


if __name__ == "__main__":
    main()
