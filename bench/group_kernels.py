"""Every fused GEMM group of a training step, timed alone against cuBLAS on its own operands:
`python3 -m bench.group_kernels --workload bert [--kernels cupy,numba_cuda] [--dtype float16]`.

One step of the workload runs through `torch.compile(backend=evt)` (ATen ops for the rest, so
the compile is quick; `--rest inductor` compiles the rest as bench/train.py's step does, whose
graph passes can change a group's operands, e.g. pad a vocabulary GEMM) with every `torch.ops.evt.run` call recorded: its kernel key and clones
of its operands. Each recorded call is then timed in interleaved rounds of do_bench, as the
evt kernel with its whole epilogue and as `torch.matmul(A, B)` on the same (possibly strided)
operands, cuBLAS without any epilogue: the floor a fused kernel approaches. Where a step
spends its time inside evt kernels, this says which groups lose to cuBLAS and by how much.
`--sweep` (cupy) also times every candidate tile configuration of each group, forced, next to the
autotuner's choice: where a group loses, whether a tile choice or the kernel itself is to blame
(with numba_cuda among --kernels, numba's schedules, the overlapped one included, and its
128 x 256 tile forced beside them;
`--no-cupy-tiles` times those beside the autotuned cupy kernel only).
`--smoke` runs the tiny CPU shapes through the NumPy kernels (checks the tool, times nothing
worth reading)."""
import argparse
import statistics
import sys
import time

from .run import do_bench, parse_options


def record_calls(workload, dtype, kernels, smoke, rest="torch"):
    """[(key, A, B, inputs, scalars)] of one compiled training step's evt calls, operands cloned."""
    import torch

    import evt_core.torch as et
    import evt_core.torch.ops as evt_ops
    from bench.train import objective, step
    from bench.train_workloads import WORKLOADS
    device = "cpu" if smoke else "cuda"
    torch.manual_seed(0)
    model, inputs, loss_fn = WORKLOADS[workload].build(smoke)
    dt = getattr(torch, dtype)
    model = model.to(device, dt)
    x, *targets = (t.to(device) for t in inputs)      # as bench/train.py: the input in dtype, targets as built
    inputs = (x.to(dt), *targets)
    et.register()
    net = torch.compile(objective(model, loss_fn), dynamic=False,
                        backend=et.backend(kernels=kernels, rest=rest, strict=True))
    step(model, net, inputs, False)              # compile outside the recording
    calls, real = [], evt_ops._run

    def recording(key, A, B, ins, scalars):
        calls.append((key, _strided_clone(A), _strided_clone(B), [_strided_clone(x) for x in ins], list(scalars)))
        return real(key, A, B, ins, scalars)
    evt_ops._run = recording
    try:
        step(model, net, inputs, False)
    finally:
        evt_ops._run = real
    return calls


def _strided_clone(x):
    """A copy with x's strides (a weight gradient's A is a transposed view: its layout matters)."""
    import torch
    out = torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=x.device)
    out.copy_(x)
    return out


def describe(key, A, B):
    import evt_core.torch.ops as evt_ops
    program = evt_ops.entry(key).tree.program
    L = A.shape[0] if A.dim() == 3 else (B.shape[0] if B.dim() == 3 else 1)
    M, K, N = A.shape[-2], A.shape[-1], B.shape[-1]
    a_major = "K" if A.stride(-1) == 1 else "M"
    b_major = "N" if B.stride(-1) == 1 else "K"
    return dict(L=L, M=M, N=N, K=K, layout=f"A {a_major}-major, B {b_major}-major", results=list(program.result_names),
                gflop=2 * L * M * N * K / 1e9)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workload", default="bert")
    ap.add_argument("--kernels", default="cupy", help="comma-separated GPU backends, each its own column")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--rest", default="torch", choices=("torch", "inductor"),
                    help="what runs the graph around the evt kernels while the calls are recorded")
    ap.add_argument("--no-cupy-tiles", action="store_true",
                    help="--sweep times numba's variants beside the autotuned cupy kernel only")
    ap.add_argument("--sweep", action="store_true", help="also time every tile of the cupy groups, forced "
                    "(and numba's schedules, when numba_cuda is among --kernels)")
    ap.add_argument("--ncu-groups", default="", metavar="N,...",
                    help="only run these groups once per backend (and cuBLAS) between cudaProfilerStart and Stop, "
                    "for `ncu --profile-from-start off`")
    ap.add_argument("--ablate", default="", metavar="K=V,...",
                    help="also time each cupy group compiled with these options changed (autotuned), "
                         "e.g. aux_ring=False: a column beside cupy's, interleaved")
    ap.add_argument("--groups", default="", help="comma-separated group numbers the sweep covers (default: all)")
    args = ap.parse_args(argv)
    import torch
    kernels = args.kernels.split(",")
    recorded = {k: record_calls(args.workload, "float32" if args.smoke else args.dtype, k, args.smoke, args.rest)
                for k in kernels}
    first = recorded[kernels[0]]
    if args.ncu_groups and not args.smoke:
        return profile_once(recorded, kernels, [int(g) for g in args.ncu_groups.split(",")])
    print(f"# evt groups of one {args.workload} {args.dtype} step against cuBLAS "
          f"({'CPU smoke' if args.smoke else torch.cuda.get_device_name()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {args.rounds} interleaved rounds)\n")
    if args.smoke:
        for key, A, B, ins, sc in first:
            print(describe(key, A, B))
        return 0
    import evt_core.torch.ops as evt_ops
    ablate = parse_options(args.ablate.split(",")) if "cupy" in kernels else {}
    columns = kernels + ([f"cupy {args.ablate}"] if ablate else [])
    head = "| # | L×M×N×K | layout | results | cuBLAS µs | " + " | ".join(f"{k} µs (× cuBLAS)" for k in columns) + " |"
    print(head + "\n|" + "---|" * (5 + len(columns)))
    totals = {k: 0.0 for k in ["cublas"] + columns}
    choices = []
    for i, (key, A, B, ins, sc) in enumerate(first):
        fns = {"cublas": lambda A=A, B=B: torch.matmul(A, B)}
        for k in kernels:
            kk, kA, kB, kins, ksc = recorded[k][i]
            fns[k] = lambda kk=kk, kA=kA, kB=kB, kins=kins, ksc=ksc: evt_ops._run(kk, kA, kB, kins, ksc)
        if ablate:
            fns[columns[-1]] = _ablated(recorded["cupy"][i], ablate)
        times = {name: [] for name in fns}
        for r in range(args.rounds):
            order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for name in order:
                times[name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median") * 1e3)
        med = {name: statistics.median(v) for name, v in times.items()}
        choices.append(kernel_choices(recorded, kernels, i))
        for name, v in med.items():
            totals[name] += v
        d = describe(key, A, B)
        cells = " | ".join(f"{med[k]:.1f} ({med[k] / med['cublas']:.2f})" for k in columns)
        print(f"| {i} | {d['L']}×{d['M']}×{d['N']}×{d['K']} | {d['layout']} | {', '.join(d['results'])} | "
              f"{med['cublas']:.1f} | {cells} |", flush=True)
    cells = " | ".join(f"**{totals[k]:.0f}** ({totals[k] / totals['cublas']:.2f})" for k in columns)
    print(f"| all | | | | **{totals['cublas']:.0f}** | {cells} |")
    print("\nKernels run: " + "; ".join(f"#{i} {c}" for i, c in enumerate(choices)))
    if args.sweep and "cupy" in recorded:
        groups = {int(g) for g in args.groups.split(",") if g}
        sweep(recorded["cupy"], args.rounds, groups, recorded.get("numba_cuda"), not args.no_cupy_tiles)
    return 0


def kernel_choices(recorded, kernels, i):
    """Which kernel each backend ran for group i, read right after its timed calls (the kernel's
    stages hold its last call; groups with equal trees share one kernel)."""
    import evt_core.torch.ops as evt_ops
    from bench.candidates import kernel_choice
    return ", ".join(f"{k} {kernel_choice(evt_ops.entry(recorded[k][i][0]).kernel('cuda')) or '?'}"
                     for k in kernels)


def _ablated(call, changes):
    """A recorded cupy call's tree compiled with `changes` over its options (autotuned on its
    first call, here), as a no-argument function on the recorded operands."""
    import evt_core
    import evt_core.torch.ops as evt_ops
    key, A, B, ins, sc = call
    e = evt_ops.entry(key)
    tensors, scal = evt_ops._call_args(e.tree.program, list(ins), list(sc))
    a = A if evt_ops._tma_reads_m_major(A, e.options) else evt_ops.k_contiguous(A)
    k = evt_core.compile(e.tree, backend="cupy", **{**e.options, **changes})
    k(a, B, **tensors, **scal)
    return lambda: k(a, B, **tensors, **scal)


def profile_once(recorded, kernels, groups):
    """The kernel of every backend and torch.matmul for each group, each warmed up (builds,
    autotuning), then run once inside the profiler's window."""
    import torch
    import evt_core.torch.ops as evt_ops
    fns = []
    for g in groups:
        fns.append(lambda g=g: torch.matmul(recorded[kernels[0]][g][1], recorded[kernels[0]][g][2]))
        fns += [lambda c=recorded[k][g]: evt_ops._run(*c) for k in kernels]
    for fn in fns:
        fn()
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"groups {groups}: profiled, each as torch.matmul, then {', '.join(kernels)}")
    return 0


def _lightened(chosen, got):
    """What a forced tile's kernel gave up against the autotuner's spec, to fit its ring."""
    gave = [("tile vectors", chosen.tile_vecs and not got.tile_vecs), ("aux TMA", chosen.aux_tma and not got.aux_tma),
            ("extra TMA stores", chosen.tma_extra and not got.tma_extra)]
    return "".join(f" -{name}" for name, lost in gave if lost)


def sweep(calls, rounds, groups, numba_calls=None, cupy_tiles=True):
    """Per group: cuBLAS, the autotuner's kernel and every tile of the family forced (`tile`:
    a tile whose ring leaves no room for the epilogue's buffers gives up tile vectors, then aux
    TMA loads, then extra TMA stores, and its label says so), µs, interleaved; with numba_calls,
    numba's kernel in each schedule too ("overlap" included), and cooperative with 128 x 256
    tiles forced."""
    import torch

    import evt_core
    import evt_core.torch.ops as evt_ops
    from evt_backends.cupy.select import tiles
    print("\n## every tile, forced (µs, × cuBLAS; * = the autotuner's choice; -x = x given up to fit)\n")
    for i, (key, A, B, ins, sc) in enumerate(calls):
        if groups and i not in groups:
            continue
        e = evt_ops.entry(key)
        auto = e.kernel("cuda")
        program = e.tree.program
        tensors, scal = evt_ops._call_args(program, list(ins), list(sc))
        a = A if evt_ops._tma_reads_m_major(A, e.options) else evt_ops.k_contiguous(A)
        auto(a, B, **tensors, **scal)
        chosen = auto.run.last
        fns = {"cublas": lambda: torch.matmul(A, B)}
        if not cupy_tiles:
            fns[f"cupy {chosen.cfg.label()}*"] = lambda: auto(a, B, **tensors, **scal)
        for cfg in tiles(chosen.spec) if cupy_tiles else ():
            try:
                k = evt_core.compile(e.tree, backend="cupy", **{**e.options, "tile": cfg})
                k(a, B, **tensors, **scal)
            except Exception as err:  # noqa: BLE001 - a tile that cannot run this epilogue is a line, not a crash
                print(f"  group {i} {cfg.label()}: {type(err).__name__}: {str(err)[:120]}")
                continue
            got = k.run.last
            label = got.cfg.label() + _lightened(chosen.spec, got.spec) + ("*" if got.cfg == chosen.cfg and
                                                                          got.spec == chosen.spec else "")
            fns[label] = lambda k=k: k(a, B, **tensors, **scal)
        if numba_calls is not None:
            nkey, nA, nB, nins, nsc = numba_calls[i]
            ne = evt_ops.entry(nkey)
            nt, ns = evt_ops._call_args(ne.tree.program, list(nins), list(nsc))
            na = nA if evt_ops._tma_reads_m_major(nA, ne.options) else evt_ops.k_contiguous(nA)
            for sched, width in (("auto", "auto"), ("pingpong", "auto"), ("cooperative", "auto"),
                                 ("cooperative", 256), ("overlap", "auto")):
                k = evt_core.compile(ne.tree, backend="numba_cuda",
                                     **{**ne.options, "sm90_schedule": sched, "sm90_tile_n": width})
                k(na, nB, **nt, **ns)
                label = f"numba {sched}" + ("" if width == "auto" else f" {width}-wide")
                if (width != "auto" or sched == "overlap") and "not taken" in k.stages.get("sm90", ""):
                    label += " (not taken)"
                fns[label] = lambda k=k: k(na, nB, **nt, **ns)
        times = {name: [] for name in fns}
        for r in range(rounds):
            order = list(fns)[r % len(fns):] + list(fns)[:r % len(fns)]
            for name in order:
                times[name].append(do_bench(fns[name], warmup=25, rep=100, return_mode="median") * 1e3)
        med = {name: statistics.median(v) for name, v in times.items()}
        cells = ", ".join(f"{n} {v:.1f} ({v / med['cublas']:.2f})" for n, v in med.items() if n != "cublas")
        print(f"- group {i} (cuBLAS {med['cublas']:.1f} µs): {cells}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
