"""`python -m evt_core.demo`: trace an epilogue, compile it with the best available backend,
check it against the reference interpreter, and say what happened. Runs without a GPU."""
import argparse
import time

import numpy as np

import evt_core
from evt_core import ops


def epilogue(accum, bias, alpha):
    z = alpha * accum + bias                 # scaled GEMM plus a per-column bias
    y = ops.gelu_tanh(z)                     # activation
    z_colsum = ops.sum(z, over="M")          # bias gradient-style column sums
    y_rowmax = ops.amax(y, over="N")         # softmax-style row statistics
    return y, z, z_colsum, y_rowmax


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--backend", default="auto", help="backend name, or 'auto' for the best available")
    ap.add_argument("--shape", default="256,192,64", help="M,N,K")
    args = ap.parse_args(argv)
    M, N, K = (int(v) for v in args.shape.split(","))
    rng = np.random.default_rng(0)
    A = rng.standard_normal((M, K)).astype(np.float16)
    B = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float32)
    examples = {"accum": np.empty((M, N), np.float32), "bias": bias, "alpha": 0.5,
                "y": np.empty((M, N), np.float16), "z": np.empty((M, N), np.float16),
                "z_colsum": np.empty((N,), np.float32), "y_rowmax": np.empty((M,), np.float32)}
    tree = evt_core.trace(epilogue, examples)
    print("traced epilogue, lowered program:")
    print(tree.program.describe())
    print("\nbackends:")
    for name, s in sorted(evt_core.backends().items()):
        print(f"  {name:11s} {'available' if s.ok else 'unavailable: ' + s.reason.splitlines()[0][:100]}")
    t0 = time.perf_counter()
    kernel = evt_core.compile(tree, backend=args.backend)
    print(f"\ncompiled with backend {kernel.backend!r} in {time.perf_counter() - t0:.2f} s")
    out = kernel(A, B, bias=bias, alpha=0.5)
    ref = evt_core.interpret(tree, A, B, bias=bias, alpha=0.5)
    exact = _float64(A, B, bias, 0.5)
    worst = 0.0
    print(f"  {'output':9s} {'shape':12s} {'dtype':8s} {'vs reference':>13s} {'vs float64':>11s}")
    for name in ref:
        got = np.asarray(out[name] if isinstance(out[name], np.ndarray) else _to_host(out[name]), np.float64)
        err_ref, err_64 = _rel(got, ref[name]), _rel(got, exact[name])
        worst = max(worst, err_ref)
        print(f"  {name:9s} {str(got.shape):12s} {str(ref[name].dtype):8s} {err_ref:13.2e} {err_64:11.2e}")
    ok = worst < 2e-2
    print("\nresult:", "matches the reference interpreter" if ok else "DOES NOT match the reference")
    return 0 if ok else 1


def _float64(A, B, bias, alpha):
    """The same math written directly in float64, independent of evt_core's op table."""
    z = alpha * (A.astype(np.float64) @ B.astype(np.float64)) + bias
    y = 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3)))
    return {"y": y, "z": z, "z_colsum": z.sum(axis=0), "y_rowmax": y.max(axis=1)}


def _rel(got, want):
    want = np.asarray(want, np.float64)
    return float(np.max(np.abs(got - want) / (np.abs(want) + 1e-2)))


def _to_host(x):
    for attr in ("get", "copy_to_host"):
        if hasattr(x, attr):
            return getattr(x, attr)()
    return np.asarray(x)


if __name__ == "__main__":
    raise SystemExit(main())
