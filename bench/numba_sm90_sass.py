"""`python3 -m bench.numba_sm90_sass`: CPU-only SASS figures of the numba_cuda sm_90a kernel
(bench/SASS-numba.md, Hopper section). Builds each kernel through numba -> LTO-IR -> nvJitLink
for sm_90a (no GPU needed) and prints registers, stack, spills and opcode counts: the
representative kernels the CPU tests assert on, then the benchmark workloads W1-W4 (fp16,
B as (K, N) row-major)."""
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, ".."), os.path.join(HERE, "..", "tests", "numba_cuda")]
os.environ.setdefault("EVT_CACHE_DIR", tempfile.mkdtemp(prefix="evt-sm90-sass-"))

OPS = ("HGMMA", "UTMALDG", "USETMAXREG", "SYNCS", "BAR", "LDG", "STG", "REDG", "LDS", "STS", "LDL", "STL", "CALL")


def _figures(built):
    from evt_backends.numba_cuda.build import sass_opcodes
    ops = sass_opcodes(built.image)
    regs = re.search(r"Used (\d+) registers", built.ptx)
    spill = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", built.ptx)
    head = f"REG {regs.group(1) if regs else '?'} STACK/SPILL {'/'.join(spill.groups()) if spill else '?'}"
    return head + " " + " ".join(f"{k} {ops.get(k, 0)}" for k in OPS) + f" total {sum(ops.values())}"


def main():
    import sm90_kernels
    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda import build as nb
    from evt_backends.numba_cuda.kernel_sm90 import module_prelude, sm90_params, sm90_source
    for name in sm90_kernels.programs():
        t = time.time()
        print(f"{name}: {_figures(sm90_kernels.build(name))} ({time.time() - t:.1f} s)", flush=True)
    for w in ("W1", "W2", "W3", "W4"):
        p = evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program
        src = module_prelude("float16", False) + "\n" + sm90_source(p, "float16", False, False, False, False)
        t = time.time()
        built = nb.build(nb.cache_key("sm90_sass", w, p.key(), src), src, "evt_kernel", sm90_params(p), sm90a=True)
        print(f"{w}: {_figures(built)} ({time.time() - t:.1f} s)", flush=True)


if __name__ == "__main__":
    main()
