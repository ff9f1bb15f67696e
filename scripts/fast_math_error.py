"""Maximum error of the cupy backend's fast transcendental spellings against float64, on the GPU.

    PYTHONPATH=$PWD:/tmp/p python3 scripts/fast_math_error.py [--points 16777216] [--out table.md]

For every op of `codegen.spelling.FAST_SPELLING` (the fast_math spellings: tanh.approx.f32,
ex2.approx.ftz.f32, rcp.approx.ftz.f32) and, for comparison, its accurate spelling, one CUDA
kernel evaluates the op over a dense sweep of its input range: `--points` evenly spaced fp32
values plus every finite fp16 value in the range. NumPy evaluates the same formula (the op's
definition in evt_core's op table) in float64. Printed (and written with --out) as a markdown
table for docs/semantics.md:

  * max abs: max |got - ref| over the sweep;
  * max rel: max |got - ref| / |ref| where |ref| >= 2^-14 (fp16's smallest normal);
  * max fp16 ulp: max |got - ref| in units of the fp16 spacing at ref (2^(e - 10) for
    2^e <= |ref| < 2^(e + 1), 2^-24 below 2^-14): below 0.5 the error hides inside the fp16
    rounding of the stored result, below 1 it changes at most the last bit.
"""
import argparse
import math
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

# op value -> (input range, float64 reference)
_K, _A = math.sqrt(2.0 / math.pi), 0.044715


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(_K * (x + _A * x ** 3)))


def _gelu_tanh_grad(x):
    t = np.tanh(_K * (x + _A * x ** 3))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _K * (1.0 + 3.0 * _A * x * x)


_erfc = np.vectorize(math.erfc, otypes=[np.float64])


def _gelu(x):
    return x * 0.5 * _erfc(-x / math.sqrt(2.0))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


REFERENCE = {
    "tanh": ((-10.0, 10.0), np.tanh),
    "exp": ((-80.0, 80.0), np.exp),
    "log": ((1e-30, 1e30), np.log),       # fast_math=True only: absolute error, large relative near 1
    "sigmoid": ((-30.0, 30.0), _sigmoid),
    "silu": ((-30.0, 30.0), lambda x: x * _sigmoid(x)),
    "gelu": ((-10.0, 10.0), _gelu),
    "gelu_tanh": ((-10.0, 10.0), _gelu_tanh),
    "gelu_tanh_grad": ((-10.0, 10.0), _gelu_tanh_grad),
}


def kernel_source():
    """One kernel per fast op: fast and accurate spellings of x[i] side by side."""
    from evt_backends.cupy.codegen.prelude import TYPES
    from evt_backends.cupy.codegen.spelling import CUDA_SPELLING, FAST_SPELLING, MATH_HELPERS
    parts = [TYPES, MATH_HELPERS]
    for op in FAST_SPELLING:
        parts.append(
            f'extern "C" __global__ void k_{op.value}(const float* x, float* fast, float* acc, long long n) {{\n'
            f"  const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            f"  if (i >= n) return;\n  const float v = x[i];\n"
            f"  fast[i] = {FAST_SPELLING[op].format(a='v')};\n  acc[i] = {CUDA_SPELLING[op].format(a='v')};\n}}\n")
    return "\n".join(parts)


def sweep(lo, hi, points):
    dense = np.linspace(lo, hi, points, dtype=np.float32)
    h = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    h = h[np.isfinite(h) & (h >= lo) & (h <= hi)]
    return np.unique(np.concatenate([dense, h]))


def fp16_ulp(ref):
    a = np.abs(ref)
    e = np.floor(np.log2(np.maximum(a, 2.0 ** -14)))
    return np.where(a < 2.0 ** -14, 2.0 ** -24, 2.0 ** (e - 10))


def errors(got, ref):
    g = got.astype(np.float64)
    finite = np.isfinite(ref) & (np.abs(ref) < 65504.0)      # where a 16-bit result is representable
    d = np.abs(g - ref)[finite]
    r = np.abs(ref[finite])
    rel = d[r >= 2.0 ** -14] / r[r >= 2.0 ** -14]
    return float(d.max()), float(rel.max()) if rel.size else 0.0, float((d / fp16_ulp(ref[finite])).max())


def measure(points):
    import cupy as cp

    from evt_backends.cupy.codegen.spelling import FAST_SPELLING
    mod = cp.RawModule(code=kernel_source(), options=("-std=c++17",))
    rows = []
    for op in FAST_SPELLING:
        (lo, hi), fn = REFERENCE[op.value]
        x = sweep(lo, hi, points)
        dx = cp.asarray(x)
        fast, acc = cp.empty_like(dx), cp.empty_like(dx)
        n = x.size
        mod.get_function(f"k_{op.value}")(((n + 255) // 256,), (256,), (dx, fast, acc, np.int64(n)))
        ref = fn(x.astype(np.float64))
        rows.append((op.value, (lo, hi), x.size, errors(cp.asnumpy(fast), ref), errors(cp.asnumpy(acc), ref)))
    return rows


def table(rows, device=""):
    lines = [f"Fast vs accurate spellings against float64{' on ' + device if device else ''} "
             f"(dense sweep of each range plus every fp16 value in it).", "",
             "| op | range | points | fast: max abs | max rel | max fp16 ulp | accurate: max abs | max rel "
             "| max fp16 ulp |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for name, (lo, hi), n, f, a in rows:
        lines.append(f"| {name} | [{lo:g}, {hi:g}] | {n} | {f[0]:.2e} | {f[1]:.2e} | {f[2]:.3f} "
                     f"| {a[0]:.2e} | {a[1]:.2e} | {a[2]:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--points", type=int, default=1 << 24)
    p.add_argument("--out", default="")
    args = p.parse_args(argv)
    import cupy as cp
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    text = table(measure(args.points), name.decode() if isinstance(name, bytes) else str(name))
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
