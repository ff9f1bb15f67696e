"""`python3 -m bench.numba_gpu_report`: on a GPU, print the SASS opcode counts of the
tensor-core kernel, the host cost per launch of the thin launch path, and the fused
GEMM + bias + ReLU time at 8192x3072x768 fp16 against torch.matmul (interleaved, CUDA events,
medians). Needs torch; writes nothing but stdout."""
import statistics
import time

import numpy as np

import evt_core
from evt_core import ops


def epilogue(accum, bias, alpha):
    D = ops.relu(alpha * accum + bias)
    return D


def _tree(M, N, dt):
    ex = {"accum": np.empty((M, N), np.float32), "bias": np.empty((N,), np.float32), "alpha": 1.0,
          "D": np.empty((M, N), dt)}
    return evt_core.trace(epilogue, ex)


def sass_report():
    """Opcode counts of every kernel this process built (cubins from nvJitLink)."""
    from evt_backends.numba_cuda import build
    want = ("HMMA", "LDSM", "LDGSTS", "CALL", "LDL", "STL", "BAR", "FFMA", "STG", "LDG", "REDG")
    for built in build._memory.values():
        if built.image_kind == "cubin":
            counts = build.sass_opcodes(built.image)
            print(f"SASS {built.entry[-40:]}: " + ", ".join(f"{k}={counts.get(k, 0)}" for k in want))


def launch_overhead(torch, n=2000):
    M = N = K = 128
    tree = _tree(M, N, np.float16)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    k = evt_core.compile(tree, backend="numba_cuda")
    for _ in range(20):
        k(A, B, bias=bias, alpha=1.0)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        k(A, B, bias=bias, alpha=1.0)
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / n * 1e6
    print(f"launch: kernel(A, B, ...) with torch tensors, 128^3 fp16, {n} calls: {host:.1f} us/call host, "
          f"{wall:.1f} us/call incl. sync")


def timing(torch, M=8192, N=3072, K=768, reps=30):
    tree = _tree(M, N, np.float16)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    k = evt_core.compile(tree, backend="numba_cuda")
    ours = k(A, B, bias=bias, alpha=1.0)["D"]
    ref = torch.relu(A.float() @ B.float() + bias)
    rel = ((ours.float() - ref).norm() / ref.norm()).item()

    def evt():
        k(A, B, bias=bias, alpha=1.0)

    def mm():
        torch.matmul(A, B)

    def mm_epi():
        torch.relu(torch.matmul(A, B) + bias)

    fns = {"evt numba_cuda fused": evt, "torch.matmul (no epilogue)": mm, "torch matmul+bias+relu": mm_epi}
    print(f"timing {M}x{N}x{K} fp16, median of {reps} (rel. error vs fp32 torch {rel:.2e}):")
    interleaved(torch, fns, 2 * M * N * K, reps)


def interleaved(torch, fns, flops, reps):
    """Time every callable of `fns` once per round, `reps` rounds (clock drift under the power
    cap then hits all alike); print and return the median microseconds of each."""
    times = {name: [] for name in fns}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    for _ in range(reps):
        for name, f in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e))
    medians = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    for name, us in medians.items():
        print(f"  {name:30s} {us:8.1f} us  {flops / us / 1e6:6.1f} TFLOP/s", flush=True)
    return medians


def main():
    import torch
    print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d %H:%M"))
    timing(torch)
    launch_overhead(torch)
    sass_report()


if __name__ == "__main__":
    main()
