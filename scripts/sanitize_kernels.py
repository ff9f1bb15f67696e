"""Representative kernels of both GPU backends, for compute-sanitizer (memcheck, racecheck):
a bias + GELU + aux-input epilogue with two 16-bit outputs and column/row reductions, fp16
and bf16, batched, at edge-tile sizes, on torch CUDA tensors. Checked against the reference;
prints one line per kernel. Run by scripts/gpu_suite.sh's sanitizer stage."""
import sys

import numpy as np

import evt_core
from evt_core import ops
from evt_core.dtypes import DTYPES

M, N, K, L = 200, 264, 72, 2


def epi(accum, C, bias, alpha):
    z = alpha * accum + bias + C
    return {"Z": z, "G": ops.gelu_tanh(z), "colsum": ops.sum(z, over="M"), "rowmax": ops.amax(z, over="N")}


def main():
    import torch
    rng = np.random.default_rng(0)
    failures = 0
    for backend in sys.argv[1:] or ("cupy", "numba_cuda"):
        for dt in ("float16", "bfloat16"):
            tdt = getattr(torch, dt)
            A = torch.tensor(rng.integers(-2, 3, (L, M, K)), dtype=tdt, device="cuda")
            B = torch.tensor(rng.integers(-2, 3, (K, N)), dtype=tdt, device="cuda")
            C = torch.tensor(rng.integers(-2, 3, (L, M, N)), dtype=tdt, device="cuda")
            bias = torch.tensor(rng.integers(-2, 3, (N,)), dtype=torch.float32, device="cuda")
            host = lambda t: t.float().cpu().numpy().astype(np.float32)  # noqa: E731
            ex = {"accum": np.empty((L, M, N), np.float32), "C": np.zeros((L, M, N), DTYPES[dt]), "bias": host(bias),
                  "alpha": 0.5, "Z": np.empty((L, M, N), np.float16), "G": np.empty((L, M, N), np.float16),
                  "colsum": np.empty((L, N), np.float32), "rowmax": np.empty((L, M), np.float32)}
            tree = evt_core.trace(epi, ex)
            kernel = evt_core.compile(tree, backend=backend)
            got = kernel(A, B, C=C, bias=bias, alpha=0.5)
            torch.cuda.synchronize()
            ref = evt_core.interpret(tree, host(A), host(B), C=host(C).astype(DTYPES[dt]), bias=host(bias), alpha=0.5)
            bad = [k for k in ref if not np.allclose(host(got[k]), ref[k], rtol=2e-2, atol=2e-2)]
            failures += bool(bad)
            print(f"{backend} {dt}: {'MISMATCH ' + str(bad) if bad else 'ok'}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
