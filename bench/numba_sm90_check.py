"""`python3 -m bench.numba_sm90_check`: on an sm_90 GPU, check numba_cuda's sm_90a kernel
(sm90=True) against torch on poisoned outputs at a few shapes, then time it at 8192x3072x768
fp16 against torch.matmul and the mma.sync kernel, interleaved (CUDA events, medians).
Run each invocation under `timeout`: a pipeline bug traps (watchdog) rather than hangs, but a
process limit is the last guard."""
import sys

import numpy as np

import evt_core
from evt_core import ops

from .numba_gpu_report import interleaved


def _bias_relu(accum, bias):
    D = ops.relu(accum + bias)
    return D


def _tree(M, N, dt):
    ex = {"accum": np.empty((M, N), np.float32), "bias": np.empty((N,), np.float32), "D": np.empty((M, N), dt)}
    return evt_core.trace(_bias_relu, ex)


def check(torch, shapes=((128, 128, 64), (77, 48, 40), (300, 520, 200), (1000, 1000, 1000), (8192, 3072, 768))):
    bad = 0
    for M, N, K in shapes:
        for dt, tdt in ((np.float16, torch.float16),):     # bf16: tests/gpu/test_numba_sm90.py
            for b_layout in ("kn", "nk"):
                A = torch.randn(M, K, device="cuda", dtype=tdt)
                B = torch.randn(K, N, device="cuda", dtype=tdt) if b_layout == "kn" else \
                    torch.randn(N, K, device="cuda", dtype=tdt).t()
                bias = torch.randn(N, device="cuda", dtype=torch.float32)
                k = evt_core.compile(_tree(M, N, dt), backend="numba_cuda", sm90=True)
                out = k(A, B, bias=bias)["D"].float()
                ref = torch.relu(A.float() @ B.float() + bias)
                rel = ((out - ref).norm() / ref.norm()).item()
                ok = rel < 2e-3 and not torch.isnan(out).any().item()
                bad += not ok
                print(f"check {M}x{N}x{K} {b_layout}: rel {rel:.2e} {'ok' if ok else 'FAIL'} "
                      f"[{k.stages.get('sm90', '')[:60]}]", flush=True)
    return bad


def timing(torch, M=8192, N=3072, K=768, reps=30):
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    tree = _tree(M, N, np.float16)
    k90 = evt_core.compile(tree, backend="numba_cuda", sm90=True)
    k80 = evt_core.compile(tree, backend="numba_cuda")
    fns = {"evt numba sm90 bias+relu": lambda: k90(A, B, bias=bias),
           "evt numba mma.sync bias+relu": lambda: k80(A, B, bias=bias),
           "torch.matmul (no epilogue)": lambda: torch.matmul(A, B)}
    print(f"timing {M}x{N}x{K} fp16, median of {reps} interleaved rounds:")
    interleaved(torch, fns, 2 * M * N * K, reps)


def main():
    import torch
    print(torch.cuda.get_device_name(), flush=True)
    bad = check(torch)
    if "--no-timing" not in sys.argv and not bad:
        timing(torch)
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
