"""Quick interleaved timing of the fused bias+GELU kernel against bare cuBLAS (torch.matmul)
and torch's unfused matmul+bias+gelu, plus the host launch overhead. Run on a GPU:

    EVT_POISON=0 python3 -m bench.cupy_quickbench

Interleaved rounds, medians (hopper-gemm-notes §3: the H200 runs GEMMs at its power cap, so
only round-robin timing is a fair comparison).
"""
import statistics
import sys
import time

import numpy as np

from bench.host_profile import profile_text


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
    print(profile_text(lambda: kern(A, B, bias=bias), 200, 12))
    sys.stdout.flush()




# ---- the W1-W4 workloads (bench/workloads.py) over sm90 schedules, against bare cuBLAS ----
VARIANTS = {
    "pp64x256s4": dict(bm=64, bn=256, bk=64, stages=4, pingpong=True),
    "pp128x128s6": dict(bm=128, bn=128, bk=64, stages=6, pingpong=True),
    "coop128x256s4": dict(bm=128, bn=256, bk=64, stages=4),
    "coop128x128s6": dict(bm=128, bn=128, bk=64, stages=6),
}


def _identity(accum):
    D = accum + 0.0
    return D


def workloads_main(shapes=((8192, 3072, 768), (8192, 768, 3072), (4096, 4096, 4096)), rounds=3,
                   keys=("W1", "W2", "W3", "W4"), variants=tuple(VARIANTS)):
    """Interleaved medians: cuBLAS (torch.matmul), our bare GEMM (identity epilogue, stored
    fp16) and every workload under every schedule; relative error of each output vs torch."""
    import torch
    from triton.testing import do_bench

    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.cupy.codegen.plan import TileConfig

    kerns = {}

    def kern_for(name, fn, example, v):
        key = (name, v)
        if key not in kerns:
            tree = evt_core.trace(fn, example)
            kerns[key] = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False,
                                          tile=TileConfig(**VARIANTS[v]))
        return kerns[key]

    for M, N, K in shapes:
        torch.manual_seed(0)
        A = torch.randn(M, K, device="cuda", dtype=torch.float16)
        B = (torch.randn(K, N, device="cuda") / K ** 0.5).to(torch.float16)
        cands = {"cublas": lambda: torch.matmul(A, B)}
        ex_id = {"accum": np.empty((M, N), np.float32), "D": np.empty((M, N), np.float16)}
        for v in ("pp64x256s4", "coop128x256s4"):
            if v in variants:
                k = kern_for("bare", _identity, ex_id, v)
                cands[f"bare/{v}"] = (lambda k=k: k(A, B))
        errs = {}
        for wk in keys:
            w = WORKLOADS[wk]
            _, _, aux = w.torch_inputs(M, N, K)
            ref = w.torch_epilogue((A.float() @ B.float()), **{n: t.float() for n, t in aux.items()})
            for v in variants:
                k = kern_for(wk, w.epilogue, w.example(M, N), v)
                try:
                    out = k(A, B, **aux)
                    torch.cuda.synchronize()
                    e = max(((out[n].float() - r.float()).norm() / r.float().norm()).item() for n, r in ref.items())
                except Exception as ex:  # noqa: BLE001
                    errs[f"{wk}/{v}"] = f"FAILED {type(ex).__name__}: {ex}"[:200]
                    continue
                errs[f"{wk}/{v}"] = f"{e:.1e}" + ("" if e < 2e-2 else " BAD")
                cands[f"{wk}/{v}"] = (lambda k=k, aux=aux: k(A, B, **aux))
        times = {c: [] for c in cands}
        for _ in range(rounds):
            for c, f in cands.items():
                times[c].append(do_bench(f, warmup=10, rep=50))
        med = {c: statistics.median(t) for c, t in times.items()}
        cb = med["cublas"]
        print(f"== {M}x{N}x{K} fp16 (interleaved medians of {rounds} rounds; cuBLAS {cb * 1e3:.1f} us)")
        for c, ms in med.items():
            print(f"  {c:26s} {ms * 1e3:8.1f} us  x{ms / cb:5.3f} of cuBLAS  err={errs.get(c, '-')}")
        for c, e in errs.items():
            if c not in med:
                print(f"  {c:26s} {e}")
        sys.stdout.flush()


def host_overhead(n=2000):
    """µs per small call, torch in/out, cached launch path on and off (bias+GELU, 128^3)."""
    import os

    import torch

    import evt_core
    from evt_core import ops

    def epi(accum, bias):
        D = ops.gelu(accum + bias)
        return D
    A = torch.randn(128, 64, device="cuda", dtype=torch.float16)
    B = torch.randn(64, 128, device="cuda", dtype=torch.float16)
    bias = torch.randn(128, device="cuda", dtype=torch.float16)
    ex = {"accum": np.empty((128, 128), np.float32), "bias": np.empty((128,), np.float16),
          "D": np.empty((128, 128), np.float16)}
    for fast in ("0", "1"):
        os.environ["EVT_CUPY_FAST_LAUNCH"] = fast
        kern = evt_core.compile(evt_core.trace(epi, ex), backend="cupy", autotune=False)
        ref = kern(A, B, bias=bias)["D"].clone()
        for _ in range(50):
            out = kern(A, B, bias=bias)["D"]
        torch.cuda.synchronize()
        assert torch.equal(out, ref), "cached launch changed the result"
        t = time.perf_counter()
        for _ in range(n):
            kern(A, B, bias=bias)
        host = (time.perf_counter() - t) / n
        torch.cuda.synchronize()
        print(f"host time per small call, fast launch={fast}: {host * 1e6:.1f} us")
        if fast == "1":
            print(profile_text(lambda: kern(A, B, bias=bias), 500, 10))
    os.environ["EVT_CUPY_FAST_LAUNCH"] = "1"
    sys.stdout.flush()


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else "bias_gelu"
    if what == "workloads":
        workloads_main()
    elif what == "host":
        host_overhead()
    else:
        main()
