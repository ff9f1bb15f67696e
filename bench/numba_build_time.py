"""`python3 -m bench.numba_build_time`: how long the numba backend takes to build a new kernel
and to find it again, on the CPU (no GPU needed: numba -> PTX -> nvJitLink cubin for sm_90).

For W0 (D = acc) and W1-W4 (bench/programs.py), fp16, the mma.sync kernel (other GPUs,
fallbacks) and the sm_90a kernel (the default on sm_90; with the fragment epilogue where it applies, and
its staged epilogue beside it) in the schedule `sm90_schedule="auto"`
picks at the benchmark shapes (ping-pong without an (M, N) input, else cooperative with it
staged):
  * build: a fresh compile into an empty cache, split into numba's front end + NVVM
    (`cuda.compile_ptx`) and the link (nvJitLink, PTX -> cubin);
  * disk hit: the same key again after the in-memory table is cleared (what a new process
    pays), median of 5.
The first call of a kernel on a GPU adds the module load (about a millisecond) to the build.
Issue targets: first call <= 2 s, cache hit <= 5 ms. Prints a markdown table.

`--gpu` measures the same on a GPU, end to end, for W1-W4 at 8192x3072x768 with torch tensors
(CUDA context already up, as in a training process): the first call of a newly compiled
kernel into an empty cache (build, module load, launch, synchronize), then the first call of
the same tree compiled again with the in-memory tables cleared (what a new process pays: the
disk hit), and a repeated call."""
import os
import platform
import statistics
import sys
import tempfile
import time

_PROGRAMS = ("identity", "w1_forward", "w2_backward", "w3_softmax_stats", "w4_layernorm_stats")


def _sources(p):
    """(variant name, generated body, params, sm90a) for the default and the sm_90a kernel."""
    from evt_backends.numba_cuda.codegen.abi import main_params
    from evt_backends.numba_cuda.codegen.mainloop_mma import mma_source
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_params, sm90_source
    from evt_backends.numba_cuda.codegen.epilogue_sm90 import tile_inputs
    yield "mma.sync", mma_source(p, "float16", True, False, False, fast_mainloop=True), main_params(p), False
    from evt_backends.gpu.fastmath import fast_ops
    from evt_backends.numba_cuda.codegen.epilogue_fragment import refusal
    staged = bool(tile_inputs(p))
    frag = refusal(p) is None
    for name, fr in (("sm_90a", frag), ("sm_90a staged epilogue", False)) if frag else (("sm_90a", False),):
        yield name, module_prelude("float16", False) + "\n" + sm90_source(p, "float16", False, False, False, False,
                                                                          not staged, staged, fr,
                                                                          fast_ops(p) if fr else ()), \
            sm90_params(p, fr), True


def _time_build(nb, key, body, params, sm90a):
    """Seconds of a fresh build: (total, numba front end + NVVM, link). The link is timed once
    more on its own from the built PTX (nvJitLink is deterministic); the front end is the rest."""
    t = time.perf_counter()
    built = nb.build(key, body, "evt_kernel", params, sm90a=sm90a)
    total = time.perf_counter() - t
    t = time.perf_counter()
    if not sm90a:
        nb._link(built.ptx, (9, 0), built.source)
    link = time.perf_counter() - t if not sm90a else float("nan")
    return total, total - link if not sm90a else float("nan"), link


def _time_hit(nb, key, body, params, sm90a):
    times = []
    for _ in range(5):
        nb._memory.clear()
        t = time.perf_counter()
        nb.build(key, body, "evt_kernel", params, sm90a=sm90a)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    os.environ["EVT_CACHE_DIR"] = tempfile.mkdtemp(prefix="evt-build-time-")
    from bench import programs as P
    from evt_backends.numba_cuda.runtime import build as nb
    import numba.cuda  # noqa: F401  (its import is not a kernel's build time)
    print(f"numba build times, {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, cache in a fresh folder\n")
    print("| program | kernel | build s | front end + NVVM s | link s | disk hit ms |")
    print("|---|---|---:|---:|---:|---:|")
    for name in _PROGRAMS:
        p = getattr(P, name)()
        for variant, body, params, sm90a in _sources(p):
            key = nb.cache_key("build-time", name, variant, body)
            total, front, link = _time_build(nb, key, body, params, sm90a)
            hit = _time_hit(nb, key, body, params, sm90a)
            cell = (lambda x: "–" if x != x else f"{x:.2f}")
            print(f"| {name} | {variant} | {total:.2f} | {cell(front)} | {cell(link)} | {hit * 1e3:.1f} |")
    return 0


def gpu_main():
    """First call, disk-hit call and repeated call of W1-W4 on the GPU (seconds / ms / µs)."""
    os.environ["EVT_CACHE_DIR"] = tempfile.mkdtemp(prefix="evt-first-call-")
    import torch

    import evt_core
    from bench.workloads import WORKLOADS
    from evt_backends.numba_cuda.runtime import build as nb
    torch.ones(1, device="cuda").sum().item()       # the context and torch's kernels are up
    print(f"numba_cuda first calls on {torch.cuda.get_device_name()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, 8192x3072x768 fp16, cache in a fresh folder\n")
    print("| workload | first call s | disk-hit call ms | repeated call µs (its GPU time included) |")
    print("|---|---:|---:|---:|")
    M, N, K = 8192, 3072, 768
    for key, w in WORKLOADS.items():
        A, B, aux = w.torch_inputs(M, N, K)
        tree = evt_core.trace(w.epilogue, w.example(M, N))

        def call():
            k = evt_core.compile(tree, backend="numba_cuda")
            k(A, B, **aux)
            torch.cuda.synchronize()
            return k
        t = time.perf_counter()
        k = call()
        first = time.perf_counter() - t
        nb._memory.clear()
        t = time.perf_counter()
        call()
        hit = time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(20):
            k(A, B, **aux)
        torch.cuda.synchronize()
        again = (time.perf_counter() - t) / 20
        print(f"| {key} | {first:.2f} | {hit * 1e3:.1f} | {again * 1e6:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(gpu_main() if "--gpu" in sys.argv[1:] else main())
