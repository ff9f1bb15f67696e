"""CPU-only SASS counts of the tensor-core kernel for the benchmark trees (bench/SASS-numba.md).

    python tests/numba_cuda/sass_counts.py [W1,W2,W3,W4,brs] ["{'fast_mainloop': True}"]

Compiles fp16 A (K-contiguous) x B (N-contiguous) for sm_90 with numba's compile_ptx +
nvJitLink (no GPU needed) and prints registers / stack (cuobjdump -res-usage) and opcode counts.
"""
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", ".."), HERE]
os.environ.setdefault("EVT_CACHE_DIR", tempfile.mkdtemp(prefix="evt-sass-"))

import evt_core  # noqa: E402
from bench.workloads import WORKLOADS  # noqa: E402
from evt_backends.numba_cuda.runtime import build  # noqa: E402
from evt_backends.numba_cuda.codegen.mainloop_mma import mma_source  # noqa: E402
from evt_backends.numba_cuda.codegen.abi import main_params  # noqa: E402
from trees import case  # noqa: E402

OPS = ("HMMA", "LDSM", "LDGSTS", "LDL", "STL", "CALL", "BAR")


def resources(cubin):
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        text = subprocess.run([build._cuobjdump(), "-res-usage", f.name], capture_output=True, text=True).stdout
    m = re.search(r"REG:(\d+) STACK:(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else (None, None)


def main(which=("W1", "W2", "W3", "W4", "brs"), opts=None):
    for w in which:
        if w == "brs":
            p = case("bias_relu_stats", 2, 13, 11, 9)[0].program
        else:
            p = evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program
        t = time.time()
        src = mma_source(p, "float16", True, False, False, **(opts or {}))
        b = build.build(build.cache_key("sass_counts", p.key(), src), src, "evt_kernel", main_params(p))
        ops = build.sass_opcodes(b.image)
        reg, stack = resources(b.image)
        print(w, f"REG {reg} STACK {stack}", " ".join(f"{k} {ops[k]}" for k in OPS),
              f"total {sum(ops.values())} ({time.time() - t:.0f} s)", flush=True)


if __name__ == "__main__":
    main(sys.argv[1].split(",") if len(sys.argv) > 1 else ("W1", "W2", "W3", "W4", "brs"),
         eval(sys.argv[2]) if len(sys.argv) > 2 else None)
