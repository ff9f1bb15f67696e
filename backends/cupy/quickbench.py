"""Quick interleaved timing of the fused bias+GELU kernel against bare cuBLAS (torch.matmul)
and torch's unfused matmul+bias+gelu, plus the host launch overhead. Run on a GPU:

    EVT_POISON=0 python -m evt_backends.cupy.quickbench

Interleaved rounds, medians (hopper-gemm-notes §3: the H200 runs GEMMs at its power cap, so
only round-robin timing is a fair comparison).
"""
import statistics
import sys
import time

import numpy as np


def main(shapes=((8192, 3072, 768), (4096, 4096, 4096)), rounds=4):
    import torch
    from triton.testing import do_bench

    import evt_core
    from evt_core import ops

    def epi(accum, bias):
        D = ops.gelu(accum + bias)
        return D

    for M, N, K in shapes:
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        B = torch.randn(K, N, device="cuda", dtype=torch.float16)
        bias = torch.randn(N, device="cuda", dtype=torch.float16)
        tree = evt_core.trace(epi, {"accum": np.empty((M, N), np.float32), "bias": np.empty((N,), np.float16),
                                    "D": np.empty((M, N), np.float16)})
        kern = evt_core.compile(tree, backend="cupy", autotune=True)
        out = kern(A, B, bias=bias)["D"]
        ref = torch.nn.functional.gelu((A.float() @ B.float()) + bias.float())
        rel = ((out.float() - ref).norm() / ref.norm()).item()
        cands = {"cublas_matmul": lambda: torch.matmul(A, B),
                 "torch_unfused": lambda: torch.nn.functional.gelu(torch.matmul(A, B) + bias),
                 "evt_cupy_fused": lambda: kern(A, B, bias=bias)}
        times = {k: [] for k in cands}
        for _ in range(rounds):
            for k, f in cands.items():
                times[k].append(do_bench(f, warmup=25, rep=100))
        med = {k: statistics.median(v) for k, v in times.items()}
        flops = 2 * M * N * K
        print(f"{M}x{N}x{K} fp16 bias+gelu  rel.err={rel:.2e}  config={kern.run.last.cfg.label()} "
              f"mainloop={kern.run.last.spec.mainloop}")
        for k, ms in med.items():
            print(f"  {k:16s} {ms * 1e3:8.1f} us  {flops / ms / 1e9:7.1f} TFLOP/s  "
                  f"vs cuBLAS {med['cublas_matmul'] / ms * 100:5.1f}%")
        print(f"  fused / bare cuBLAS = {med['evt_cupy_fused'] / med['cublas_matmul']:.3f}")
    # host-side cost of one small call (bind + spec + pack + launch), torch arrays in and out
    A = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    B = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    bias = torch.randn(128, device="cuda", dtype=torch.float16)
    tree = evt_core.trace(epi, {"accum": np.empty((128, 128), np.float32), "bias": np.empty((128,), np.float16),
                                "D": np.empty((128, 128), np.float16)})
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    for _ in range(20):
        kern(A, B, bias=bias)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(500):
        kern(A, B, bias=bias)
    host = (time.perf_counter() - t) / 500
    torch.cuda.synchronize()
    print(f"host time per small call (torch in/out): {host * 1e6:.1f} us")
    import cProfile
    import pstats
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(200):
        kern(A, B, bias=bias)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(12)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
