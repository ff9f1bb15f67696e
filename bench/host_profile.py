"""Where the host time of a tiny call goes: `python3 -m bench.host_profile [--calls 2000]
[--backends numba_cuda,cupy] [--top 25]`. The same call as bench.launch_overhead (128^3 fp16,
bias + ReLU, torch tensors), run under cProfile after a warm-up; prints each backend's functions
by their own time. cProfile inflates Python frames, so read shares, not absolute microseconds."""
import argparse
import cProfile
import io
import pstats


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--backends", default="numba_cuda,cupy")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    import torch

    import evt_core
    from bench.launch_overhead import tiny_problem
    A, B, bias, tree = tiny_problem()
    for name in args.backends.split(","):
        kernel = evt_core.compile(tree, backend=name)
        for _ in range(50):
            kernel(A, B, bias=bias)
        torch.cuda.synchronize()
        prof = cProfile.Profile()
        prof.enable()
        for _ in range(args.calls):
            kernel(A, B, bias=bias)
        prof.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(args.top)
        print(f"===== {name}: {kernel.run.__self__.stages.get('sm90', '') if hasattr(kernel.run, '__self__') else ''}")
        print(text.getvalue())


if __name__ == "__main__":
    main()
