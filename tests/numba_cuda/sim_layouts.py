"""Every layout case of tests/layout_cases.py through the numba_cuda kernels under the CUDA
simulator, at sizes of several simulator tiles (8 x 8) in M and N, poisoned outputs. Run as a
script by test_simulator.py (the simulator must be chosen before numba.cuda is imported)."""
import os
import sys
import time

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
os.environ["EVT_POISON"] = "1"
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

import evt_core  # noqa: E402
from tests import layout_cases  # noqa: E402


def main():
    L_M_N_K = (6, 20, 24, 8)      # 3 x 3 tiles per batch, K in 2 blocks
    for name, L in layout_cases.instances():
        t = time.perf_counter()
        _, M, N, K = L_M_N_K
        tree, A, B, inputs = layout_cases.build(name, L, M, N, K, ab="float32")
        kernel = evt_core.compile(tree, backend="numba_cuda")
        layout_cases.check(kernel(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), f"{name} L={L}")
        print(f"ok {name} L={L} {time.perf_counter() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
