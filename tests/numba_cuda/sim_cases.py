"""Simulator cases, run as a script in a subprocess by test_simulator.py: NUMBA_ENABLE_CUDASIM
must be set before numba.cuda is first imported, which a pytest process may already have done.
Prints one line per case and exits non-zero on the first mismatch."""
import os
import sys
import time

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
os.environ["EVT_POISON"] = "1"       # every output element must be written by the kernel
sys.path.insert(0, os.path.dirname(__file__))

import evt_core  # noqa: E402
from trees import case, compare  # noqa: E402

CASES = [
    # (epilogue, L, M, N, K, A/B dtype, output dtype, column-major aux, options)
    ("bias_relu_stats", 2, 13, 11, 9, "float16", "float16", False, {}),
    ("bias_relu_stats", 0, 10, 7, 5, "float32", "float32", True, {"deterministic": True}),
    ("activations", 0, 9, 10, 6, "float32", "float32", False, {}),
    ("dgelu", 2, 11, 9, 5, "float16", "float16", False, {}),
    ("means", 3, 7, 9, 4, "float16", "float16", False, {"deterministic": True}),
    ("means", 2, 9, 5, 3, "float32", "float32", False, {}),
]


def main():
    for name, L, M, N, K, ab, out, cm, opts in CASES:
        t = time.perf_counter()
        tree, A, B, inputs = case(name, L, M, N, K, ab, out, cm)
        kernel = evt_core.compile(tree, backend="numba_cuda", **opts)
        ref = evt_core.interpret(tree, A, B, **inputs)
        for call in ("first", "replayed"):   # the second call replays the cached bind plan
            compare(kernel(A, B, **inputs), ref, f"{name} L={L} M={M} N={N} K={K} {ab} {opts} ({call} call)")
        print(f"ok {name} L={L} M={M} N={N} K={K} {ab}->{out} {opts} {time.perf_counter() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
