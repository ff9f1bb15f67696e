"""Every kernel configuration of one workload, forced, timed side by side (H200; interleaved):

    python3 -m bench.tile_sweep --rungs W2,W4 --shapes 8192x3072x768 [--rounds 3] [--no-cupy-tiles]
        [--numba 'sm90_schedule="pingpong"' --numba 'fast_math=True:sm90_tile_n=256' ...]

Per rung and shape: cuBLAS (torch.matmul, the floor), the cupy backend's autotuned kernel and
every tile of its sm90 family forced (`tile`: a tile whose ring leaves no room for the
epilogue's buffers gives them up, and its label says which), and the numba_cuda backend with
its defaults plus one row per `--numba` option set. Where a workload loses to cuBLAS, this says
whether a tile or schedule choice or the kernel itself is to blame, and what an option is worth.

Each candidate is timed twice: called (what a user's eager call costs, host work included where the
host falls behind) and as a CUDA graph of 10 calls replayed (the kernels alone); its host µs per
call (100 calls enqueued without a wait) says when the called column measures the host.

Before timing, every candidate's outputs (NaN-filled by bind first: EVT_POISON) are compared with the
autotuned cupy kernel's (rtol 2e-2 / atol 1e-2 on 16-bit outputs, 1e-3 relative on fp32
reductions); a candidate that disagrees is reported and not timed.
"""
import argparse
import statistics
import sys


def _options(text):
    """'k=v:k2=v2' (bench.ladder's backend-spec syntax) -> {k: literal v}."""
    from .run import split_spec
    return split_spec("numba_cuda:" + text)[1] if text else {}


def sweep_one(workload, shape, rounds, numba_sets, cupy_tiles=True):
    import torch
    from .run import do_bench

    import evt_core
    from evt_backends.cupy.select import tiles

    from .candidates import _poisoned, kernel_choice
    from .checks import check_outputs
    M, N, K = shape
    A, B, aux = workload.torch_inputs(M, N, K)
    tree = evt_core.trace(workload.epilogue, workload.example(M, N))

    def poisoned_call(k):
        k(A, B, **aux)                                           # warm (build, autotune)
        return _poisoned(lambda: k(A, B, **aux))                 # outputs NaN-filled by bind

    auto = evt_core.compile(tree, backend="cupy")
    # the autotuned cupy kernel's outputs (checked by the ladder against the fp32 reference) are
    # the reference here: every other configuration must agree with them through bench.checks
    ref = {n: t.float() for n, t in poisoned_call(auto).items()}
    chosen = auto.run.last
    fns = {"cublas": lambda: torch.matmul(A, B), f"cupy auto {chosen.cfg.label()}": lambda: auto(A, B, **aux)}
    kernels = []
    for cfg in tiles(chosen.spec) if cupy_tiles else ():
        kernels.append((f"cupy {cfg.label()}", lambda cfg=cfg: evt_core.compile(tree, backend="cupy", tile=cfg)))
    for opts in [{}] + numba_sets:
        label = "numba " + (",".join(f"{k}={v}" for k, v in opts.items()) or "defaults")
        kernels.append((label, lambda opts=opts: evt_core.compile(tree, backend="numba_cuda", **opts)))
    for label, make in kernels:
        try:
            k = make()
            why, _ = check_outputs(poisoned_call(k), ref, lambda t: t.float())
        except Exception as err:  # noqa: BLE001 - a configuration that cannot run is a line, not a crash
            print(f"  {label}: {type(err).__name__}: {str(err)[:160]}")
            continue
        if why:
            print(f"  {label}: WRONG, not timed: {why}")
            continue
        if label.startswith("numba"):
            ring = ", aux ring" if "ring" in (k.stages.get("sm90") or "") else ""
            label += f" [{kernel_choice(k)}{ring}]"
        fns[label] = lambda k=k: k(A, B, **aux)
    graphs = {name: _graphed(fn) for name, fn in fns.items()}
    timed = {(name, how): f for name in fns for how, f in (("call", fns[name]), ("graph", graphs[name])) if f}
    per = {key: getattr(f, "calls", 1) for key, f in timed.items()}
    times = {key: [] for key in timed}
    for r in range(rounds):
        order = list(timed)[r % len(timed):] + list(timed)[:r % len(timed)]
        for key in order:
            times[key].append(do_bench(timed[key], warmup=25, rep=100, return_mode="median") * 1e3 / per[key])
    med = {key: statistics.median(v) for key, v in times.items()}
    host = {name: _host_us(fn) for name, fn in fns.items()}
    print(f"\n### {workload.key} {M}×{N}×{K}: {workload.title}\n")
    print("| kernel | call µs | × cuBLAS | graph µs | × cuBLAS | host µs per call |\n|---|---:|---:|---:|---:|---:|")
    for name in fns:
        cells = []
        for how in ("call", "graph"):
            v, base = med.get((name, how)), med.get(("cublas", how))
            cells.append("— | —" if v is None else f"{v:.1f} | " + (f"{v / base:.3f}" if base else "—"))
        print(f"| {name} | {' | '.join(cells)} | {host[name]:.1f} |", flush=True)


def _host_us(fn, calls=100):
    """Host µs per call: `calls` calls enqueued back to back without a wait (the GPU's queue
    absorbs them; bench.launch_overhead's measure). Where it nears the call's GPU time, event
    timing of the called path measures the host, not the kernel."""
    import torch

    from .launch_overhead import per_call_us
    return per_call_us(fn, calls, torch)[0]


def _graphed(fn, calls=10):
    """`calls` calls of fn captured in one CUDA graph, as a function replaying it and timing one
    call's share: the kernels' own time, without the host's per-call work (which event timing
    shows whenever the host falls behind the GPU); None where the capture fails."""
    import torch
    try:
        fn()                            # lazy set-up (cuBLAS's handle and workspace) outside the capture
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(calls):
                fn()
    except Exception as err:  # noqa: BLE001 - reported as a missing column
        print(f"  capture failed: {type(err).__name__}: {str(err)[:120]}")
        return None
    return _Replay(g, calls)


class _Replay:
    """g.replay() as a callable whose do_bench time divided by `calls` is one call's."""
    def __init__(self, g, calls):
        self.g, self.calls = g, calls

    def __call__(self):
        self.g.replay()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rungs", default="W2,W4")
    ap.add_argument("--shapes", default="8192x3072x768")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--numba", action="append", default=[], help="a numba_cuda option set, 'k=v:k2=v2' as in bench.ladder's specs (repeatable)")
    ap.add_argument("--no-cupy-tiles", action="store_true", help="only the autotuned cupy kernel (quicker: numba's options against it)")
    args = ap.parse_args(argv)
    import time

    import torch
    from .ladder import LADDER
    from .workloads import parse_shape
    print(f"# tile sweep ({torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{args.rounds} interleaved rounds of do_bench medians)")
    for key in args.rungs.split(","):
        for text in args.shapes.split(","):
            sweep_one(LADDER[key], parse_shape(text), args.rounds, [_options(s) for s in args.numba],
                      cupy_tiles=not args.no_cupy_tiles)
    return 0


if __name__ == "__main__":
    sys.exit(main())
