"""`python3 -m bench.numba_gpu_report`: on a GPU, print the SASS opcode counts of the
tensor-core kernel, the host cost per launch of the thin launch path, and the fused
GEMM + bias + ReLU time at 8192x3072x768 fp16 against torch.matmul (interleaved, CUDA events,
medians). Needs torch; writes nothing but stdout.

`--sm90`: on an sm_90 GPU, instead check the sm_90a kernel (sm90=True) against torch on
poisoned outputs at a few shapes, then time it at 8192x3072x768 fp16 against torch.matmul and
the mma.sync kernel (run it under `timeout`: a pipeline bug traps rather than hangs, but a
process limit is the last guard). `--sm90-sass`: CPU-only, the sm_90a kernels' registers,
spills and opcode counts (bench/SASS-numba.md, Hopper section): the representative kernels the
CPU tests assert on, then W1-W4 (fp16, B as (K, N) row-major)."""
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

import evt_core
from evt_core import ops


def epilogue(accum, bias, alpha):
    D = ops.relu(alpha * accum + bias)
    return D


def _tree(M, N, dt):
    ex = {"accum": np.empty((M, N), np.float32), "bias": np.empty((N,), np.float32), "alpha": 1.0,
          "D": np.empty((M, N), dt)}
    return evt_core.trace(epilogue, ex)


def sass_report():
    """Opcode counts of every kernel this process built (cubins from nvJitLink)."""
    from evt_backends.numba_cuda.runtime import build
    want = ("HMMA", "LDSM", "LDGSTS", "CALL", "LDL", "STL", "BAR", "FFMA", "STG", "LDG", "REDG")
    for built in build._memory.values():
        if built.image_kind == "cubin":
            counts = build.sass_opcodes(built.image)
            print(f"SASS {built.entry[-40:]}: " + ", ".join(f"{k}={counts.get(k, 0)}" for k in want))


def launch_overhead(torch, n=2000):
    M = N = K = 128
    tree = _tree(M, N, np.float16)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    k = evt_core.compile(tree, backend="numba_cuda")
    for _ in range(20):
        k(A, B, bias=bias, alpha=1.0)
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        k(A, B, bias=bias, alpha=1.0)
    host = (time.perf_counter() - t) / n * 1e6
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t) / n * 1e6
    print(f"launch: kernel(A, B, ...) with torch tensors, 128^3 fp16, {n} calls: {host:.1f} us/call host, "
          f"{wall:.1f} us/call incl. sync")


def timing(torch, M=8192, N=3072, K=768, reps=30):
    tree = _tree(M, N, np.float16)
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    k = evt_core.compile(tree, backend="numba_cuda")
    ours = k(A, B, bias=bias, alpha=1.0)["D"]
    ref = torch.relu(A.float() @ B.float() + bias)
    rel = ((ours.float() - ref).norm() / ref.norm()).item()

    def evt():
        k(A, B, bias=bias, alpha=1.0)

    def mm():
        torch.matmul(A, B)

    def mm_epi():
        torch.relu(torch.matmul(A, B) + bias)

    fns = {"evt numba_cuda fused": evt, "torch.matmul (no epilogue)": mm, "torch matmul+bias+relu": mm_epi}
    print(f"timing {M}x{N}x{K} fp16, median of {reps} (rel. error vs fp32 torch {rel:.2e}):")
    interleaved(torch, fns, 2 * M * N * K, reps)


def interleaved(torch, fns, flops, reps):
    """Time every callable of `fns` once per round, `reps` rounds (clock drift under the power
    cap then hits all alike); print and return the median microseconds of each."""
    times = {name: [] for name in fns}
    for f in fns.values():
        f()
    torch.cuda.synchronize()
    for _ in range(reps):
        for name, f in fns.items():
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            f()
            e.record()
            e.synchronize()
            times[name].append(s.elapsed_time(e))
    medians = {name: statistics.median(ts) * 1e3 for name, ts in times.items()}
    for name, us in medians.items():
        print(f"  {name:30s} {us:8.1f} us  {flops / us / 1e6:6.1f} TFLOP/s", flush=True)
    return medians


# ---- the sm_90a kernel (sm90=True) ------------------------------------------------------------

SM90_OPS = ("HGMMA", "UTMALDG", "UTMASTG", "USETMAXREG", "SYNCS", "BAR", "LDG", "LDGSTS", "STG", "REDG", "LDS", "STS", "LDL", "STL",
            "CALL")


def _figures(built):
    from evt_backends.numba_cuda.runtime.build import sass_opcodes
    ops = sass_opcodes(built.image)
    regs = re.search(r"Used (\d+) registers", built.ptx)
    spill = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", built.ptx)
    head = f"REG {regs.group(1) if regs else '?'} STACK/SPILL {'/'.join(spill.groups()) if spill else '?'}"
    return head + " " + " ".join(f"{k} {ops.get(k, 0)}" for k in SM90_OPS) + f" total {sum(ops.values())}"


def sm90_sass():
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path.insert(0, os.path.join(here, "..", "tests", "numba_cuda"))     # the kernels the tests build
    os.environ.setdefault("EVT_CACHE_DIR", tempfile.mkdtemp(prefix="evt-sm90-sass-"))
    import sm90_kernels
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda.runtime import build as nb
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_params, sm90_source
    for name in sm90_kernels.programs():
        t = time.time()
        print(f"{name}: {_figures(sm90_kernels.build(name))} ({time.time() - t:.1f} s)", flush=True)
    # W1-W4 in the variant "auto" picks at the benchmark shapes (select.variant): the fragment
    # epilogue with fast math, ping-pong for W1 and W3, cooperative for W2/W4 with their (M, N)
    # input TMA-loaded through the ring; then the staged epilogue beside it (its (M, N) input
    # copied by cp.async). R0 at 8192 x 3072 x 768 is the kernel "wide_bare" above.
    from evt_backends.gpu.fastmath import fast_ops
    for w, pingpong, mn_input in (("W1", True, False), ("W2", False, True), ("W3", True, False), ("W4", False, True)):
        p = evt_core.trace(WORKLOADS[w].epilogue, WORKLOADS[w].example(64, 64)).program
        for frag in (True, False):
            ring = frag and mn_input
            src = module_prelude("float16", False) + "\n" + sm90_source(
                p, "float16", False, False, False, False, pingpong if frag else w in ("W1", "W3"),
                mn_input and not ring, frag, fast_ops(p) if frag else (), aux_ring=ring)
            t = time.time()
            built = nb.build(nb.cache_key("sm90_sass", w, frag, p.key(), src), src, "evt_kernel",
                             sm90_params(p, frag, ring), sm90a=True)
            sched = "ping-pong" if (pingpong if frag else w in ("W1", "W3")) else "cooperative"
            how = (", input through the ring" if ring else ", input by cp.async") if mn_input else ""
            print(f"{w} ({'fragment' if frag else 'staged'} epilogue, {sched}{how}): "
                  f"{_figures(built)} ({time.time() - t:.1f} s)", flush=True)


def sm90_check(torch, shapes=((128, 128, 64), (77, 48, 40), (300, 520, 200), (1000, 1000, 1000), (8192, 3072, 768))):
    bad = 0
    for M, N, K in shapes:
        for b_layout in ("kn", "nk"):     # fp16 here; bf16 in tests/gpu/test_numba_sm90.py
            A = torch.randn(M, K, device="cuda", dtype=torch.float16)
            B = torch.randn(K, N, device="cuda", dtype=torch.float16) if b_layout == "kn" else \
                torch.randn(N, K, device="cuda", dtype=torch.float16).t()
            bias = torch.randn(N, device="cuda", dtype=torch.float32)
            k = evt_core.compile(_tree(M, N, np.float16), backend="numba_cuda", sm90=True)
            out = k(A, B, bias=bias, alpha=1.0)["D"].float()      # EVT_POISON=1 poisons it first
            ref = torch.relu(A.float() @ B.float() + bias)
            rel = ((out - ref).norm() / ref.norm()).item()
            ok = rel < 2e-3 and not torch.isnan(out).any().item()
            bad += not ok
            print(f"check {M}x{N}x{K} {b_layout}: rel {rel:.2e} {'ok' if ok else 'FAIL'} "
                  f"[{k.stages.get('sm90', '')[:60]}]", flush=True)
    return bad


def sm90_timing(torch, M=8192, N=3072, K=768, reps=30):
    A = torch.randn(M, K, device="cuda", dtype=torch.float16)
    B = torch.randn(K, N, device="cuda", dtype=torch.float16)
    bias = torch.randn(N, device="cuda", dtype=torch.float32)
    tree = _tree(M, N, np.float16)
    k90 = evt_core.compile(tree, backend="numba_cuda", sm90=True)
    k80 = evt_core.compile(tree, backend="numba_cuda")
    fns = {"evt numba sm90 bias+relu": lambda: k90(A, B, bias=bias, alpha=1.0),
           "evt numba mma.sync bias+relu": lambda: k80(A, B, bias=bias, alpha=1.0),
           "torch.matmul (no epilogue)": lambda: torch.matmul(A, B)}
    print(f"timing {M}x{N}x{K} fp16, median of {reps} interleaved rounds:")
    interleaved(torch, fns, 2 * M * N * K, reps)


def main():
    if "--sm90-sass" in sys.argv:
        return sm90_sass()
    import torch
    print(torch.cuda.get_device_name(), time.strftime("%Y-%m-%d %H:%M"))
    if "--sm90" in sys.argv:
        os.environ["EVT_POISON"] = "1"
        bad = sm90_check(torch)
        if not bad:
            sm90_timing(torch)
        sys.exit(1 if bad else 0)
    timing(torch)
    launch_overhead(torch)
    sass_report()


if __name__ == "__main__":
    main()
