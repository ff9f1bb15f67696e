"""Per-call decisions: which mainloop and loaders a bound call's layouts allow (`decide_spec`),
and which tile configurations fit (`candidates`). Pure Python on pointers and strides, so it
runs on every call at microsecond cost and is unit-tested without a GPU.
"""
from evt_core.errors import UnsupportedError

from evt_core.tree.ops import Op

from .codegen import sm80, sm90
from .codegen.sm90_overlap import refusal as overlap_refusal, require as overlap_require
from .codegen.plan import N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, Spec, TileConfig
from ..gpu.fastmath import fast_ops  # noqa: F401  (the shared rule; backend.py imports it from here)
from ..gpu.reductions import dense_as_workspace
from ..gpu import overlap, sm90 as sm90_geometry, splitk
from ..gpu.sm90 import tma_rows_ok
from .codegen.sm90_io import ring_holds_aux

SMEM_LIMIT = 232448          # 227 KB: the per-block opt-in maximum on sm_90
_ITEM = {"float32": 4, "float16": 2, "bfloat16": 2}


def n_class(strides, ptr, dtype):
    """How a tensor runs along N, from its frame strides (L, M, N) and base pointer."""
    sL, sM, sN = strides
    item = _ITEM[dtype]
    if sN == 0:
        return N_BROADCAST
    if sN == 1:
        aligned = ptr % (2 * item) == 0 and sM % 2 == 0 and sL % 2 == 0
        return N_UNIT_PAIR if aligned else N_UNIT
    return N_GENERIC


def a_layout(a_strides, ptr, item, mn_major_tma):
    """(K-major, TMA can load it) for an A of strides (L, M, K): a K-major A needs 16-byte
    aligned rows along M; an M-major A (unit M stride, with option a_mn_major_tma) is loaded as
    panels and needs 16-byte aligned rows along K. Also read by the torch op, which copies an
    A this says TMA cannot take."""
    aL, aM, aK = a_strides
    kmajor = not (mn_major_tma and aM == 1 and aK != 1)
    return kmajor, (tma_rows_ok(ptr, aM, aL, item) and aK == 1 if kmajor else tma_rows_ok(ptr, aK, aL, item))


def _async_ok(ptr, row_stride, batch_stride, inner_extent, item):
    epc = 16 // item
    return ptr % 16 == 0 and row_stride % epc == 0 and batch_stride % epc == 0 and inner_extent % epc == 0


def decide_spec(program, bound, options, cc, report=None, sms=None):
    """The Spec for this call. Raises UnsupportedError when mainloop="sm90" is forced on a call
    TMA cannot take, naming the operand and why. `report`, a list, receives one line per
    tensor that a fast path (aux_tma, tma_store_all) could not take, with the reason. sms: the
    GPU's SM count, which split_k="auto" reads (backends/gpu/splitk.split_count)."""
    if report is None:
        report = []
    dt = bound.dtype
    item = _ITEM[dt]
    (aL, aM, aK), (bL, bK, bN) = bound.a_strides, bound.b_strides
    pa, pb = bound.A.ptr, bound.B.ptr
    b_kmajor = bK == 1 and bN != 1
    a_kmajor, a_tma = a_layout(bound.a_strides, pa, item, options.get("a_mn_major_tma"))
    b_tma = (tma_rows_ok(pb, bN, bL, item) if b_kmajor else bN == 1 and tma_rows_ok(pb, bK, bL, item))
    want = options["mainloop"]
    can90 = cc >= (9, 0) and cc < (10, 0) and dt != "float32" and a_tma and b_tma
    if want == "sm90" and not can90:
        why = ("fp32 inputs have no exact wgmma (use sm80)" if dt == "float32" else
               "the GPU is not sm_90" if not (9, 0) <= cc < (10, 0) else
               f"A (strides {bound.a_strides}) must be K-contiguous (or M-contiguous with a_mn_major_tma=True) "
               "with 16-byte aligned rows" if not a_tma else
               f"B (strides {bound.b_strides}) needs unit stride along N or K and 16-byte aligned rows "
               f"(N % 8 == 0 / K % 8 == 0 for 16-bit data)")
        raise UnsupportedError(f"mainloop='sm90' cannot run this call: {why}; pass mainloop='auto' or 'sm80'")
    use90 = can90 and want in ("auto", "sm90")
    in_cls = tuple(n_class(t.strides, t.array.ptr, op.dtype) for t, op in zip(bound.inputs, program.inputs))
    out_cls = tuple(n_class(t.strides, t.array.ptr, op.dtype) for t, op in zip(bound.outputs, program.outputs))
    tma_out, tma_extra, aux_tma = -1, (), ()
    # the int given, or for "auto" the shared rule on 128 x 128 tiles (the autotuner's are that or wider)
    split = splitk.requested(options.get("split_k", 1), bound.L, bound.M, bound.N, bound.K, sms,
                             sm90_geometry.BK) if use90 else 1
    if use90:
        storable = []
        for i, (t, op) in enumerate(zip(bound.outputs, program.outputs)):
            sL, sM, sN = t.strides
            spans = program.spans(op)
            if not (spans[1] and spans[2]):
                continue
            why = ("fp32" if op.dtype == "float32" else
                   "batched call, output without the L axis" if not (spans[0] or not program.batched or bound.L == 1)
                   else f"strides {t.strides}: TMA needs unit N stride and 16-byte aligned base and rows"
                   if not (sN == 1 and tma_rows_ok(t.array.ptr, sM, sL, 2)) else "")
            if why:
                report.append(f"output {op.name!r}: direct stores ({why})")
            else:
                storable.append(i)
        if storable:
            tma_out = storable[0]
            if options.get("tma_store_all"):
                tma_extra = tuple(storable[1:])
        if options.get("aux_tma") and split > 1:
            report.append("aux inputs: per-thread loads (split_k: only the last split of a tile runs the "
                          "epilogue, so the producer cannot load them ahead)")
        elif options.get("aux_tma"):
            aux = []
            for i, (t, op) in enumerate(zip(bound.inputs, program.inputs)):
                sL, sM, sN = t.strides
                spans = program.spans(op)
                if not (spans[1] and spans[2]):
                    continue
                # row-major 16-bit M x N tiles with 16-byte aligned rows (TMA's rule); an input
                # without the L axis of a batched program is the same 2-D tile for every batch
                if (op.dtype != "float32" and sN == 1 and (sM != 0)
                        and tma_rows_ok(t.array.ptr, sM, sL if spans[0] else 0, 2)):
                    aux.append(i)
                else:
                    why = ("fp32" if op.dtype == "float32" else
                           f"strides {t.strides}: TMA needs unit N stride and 16-byte aligned base and rows")
                    report.append(f"input {op.name!r}: per-thread loads ({why})")
            aux_tma = tuple(aux)
    if use90:
        a_load = b_load = "tma"
    else:
        a_load = "async" if aK == 1 and _async_ok(pa, aM, aL, bound.K, item) else "scalar"
        inner = bound.K if b_kmajor else bound.N
        outer = bN if b_kmajor else bK
        unit = bK == 1 if b_kmajor else bN == 1
        b_load = "async" if unit and _async_ok(pb, outer, bL, inner, item) else "scalar"
    direct = ()
    if not options["deterministic"]:
        direct = tuple(r for r, (t, red) in enumerate(zip(getattr(bound, "reductions", ()), program.reductions))
                       if _direct_ok(red, t, bound))
    fm = options.get("fast_math", "auto")
    spec = Spec(dt, "sm90" if use90 else "sm80", a_load, b_load, b_kmajor, aL != 0, bL != 0,
                in_cls, out_cls, tma_out, bool(options["deterministic"]), tma_extra, aux_tma,
                fm is True, fast_ops(program) if fm == "auto" else (), direct, a_kmajor=a_kmajor or not use90,
                split_k=split, aux_ring=bool(options.get("aux_ring", True)))
    return _fit_options(program, spec, report)


def _direct_ok(red, t, bound):
    """A reduction can combine straight into its output (no workspace, no finishing pass) when
    the output is fp32, the op needs no final division, and the output is laid out densely in
    (L, M, N) order over the kept axes, exactly as the atomic workspace would be."""
    if red.op is Op.MEAN or red.operand.dtype != "float32":
        return False
    kept = tuple(1 if ax in red.over else e for ax, e in zip("LMN", (bound.L, bound.M, bound.N)))
    return dense_as_workspace(t.strides, kept)


def _fit_options(program, spec, report):
    """aux_tma / tma_store_all buffers that leave no candidate tile in shared memory (many aux
    inputs or outputs plus reduction buffers) are given up, last first: the call falls back to
    __ldg loads / direct stores for those tensors (named in `report`)."""
    import dataclasses

    from .codegen.plan import tile_vectors
    while spec.aux_tma or spec.tma_extra or tile_vectors(program, spec):
        try:
            candidates(program, spec)
            return spec
        except UnsupportedError:
            if not spec.aux_tma and not spec.tma_extra:
                report.append("broadcast vectors: per-fragment loads (shared memory: no tile fits the vector buffers)")
                return dataclasses.replace(spec, tile_vecs=False)
            if spec.aux_tma:
                k = spec.aux_tma[-1]
                report.append(f"input {program.inputs[k].name!r}: per-thread loads (shared memory: no tile fits "
                              f"its TMA buffer)")
                spec = dataclasses.replace(spec, aux_tma=spec.aux_tma[:-1])
            else:
                k = spec.tma_extra[-1]
                report.append(f"output {program.outputs[k].name!r}: direct stores (shared memory: no tile fits "
                              f"its staging)")
                spec = dataclasses.replace(spec, tma_extra=spec.tma_extra[:-1])
    return spec


def fast_path_summary(program, spec, cfg, report):
    """One readable block for kernel.stages["fast_paths"]: what this call's kernel got, and
    every tensor a fast path fell back on, with the reason."""
    from .codegen.plan import tile_vectors, tma_outputs
    lines = [f"mainloop {spec.mainloop}, tile {cfg.label()}"]
    if spec.mainloop == "sm90":
        lines.append("TMA-stored outputs: " + (", ".join(program.outputs[k].name for k in tma_outputs(spec)) or "none"))
        lines.append("TMA-loaded inputs: " + (", ".join(program.inputs[k].name for k in spec.aux_tma) or "none"))
        tv = tile_vectors(program, spec)
        lines.append("broadcast vectors staged per tile: " + (", ".join(program.inputs[k].name for k in tv) or "none"))
    if program.reductions:
        lines.append("reductions combined straight into their outputs (no finishing pass): "
                     + (", ".join(program.reductions[r].name for r in spec.direct_reds) or "none"))
    fast = "all" if spec.fast_math else (", ".join(f"%{i} {program.instrs[i].op.value}" for i in spec.fast_ops)
                                         or "none")
    lines.append(f"fast transcendentals: {fast}")
    lines += [f"fallback: {r}" for r in report] or ["fallback: none"]
    return "\n".join(lines)


def smem_bytes(program, spec, cfg):
    mod = sm90 if spec.mainloop == "sm90" else sm80
    return mod.smem_bytes(program, spec, cfg)


def tiles(spec):
    """Every tile configuration the kernel family has for this spec's mainloop, best guess
    first, before any shared-memory fit (`candidates` keeps those that fit)."""
    if spec.mainloop == "sm90":
        # ping-pong first: its epilogue overlaps the other consumer's mainloop (the cooperative
        # schedule leaves the tensor cores idle during every epilogue, 1.16-1.75x cuBLAS)
        raw = [TileConfig(64, 256, 64, stages=4, pingpong=True)]
        raw += [TileConfig(128, 128, 64, stages=s, pingpong=True) for s in (6, 5)]
        if spec.split_k > 1:       # split-K runs on the cooperative schedule only
            raw = []
        raw += [TileConfig(128, 256, 64, stages=s) for s in (4, 3)]
        raw += [TileConfig(128, 128, 64, stages=s) for s in (6, 5, 4)]
        raw += [TileConfig(128, 256, 64, stages=4, group_m=16)]
    elif spec.dtype == "float32":
        raw = [TileConfig(128, 128, 16, 2, 4, 4), TileConfig(64, 128, 16, 2, 4, 4), TileConfig(128, 64, 16, 4, 2, 4)]
    else:
        raw = [TileConfig(128, 128, 32, 2, 4, 4), TileConfig(128, 256, 32, 2, 4, 3),
               TileConfig(64, 128, 32, 2, 2, 4), TileConfig(128, 128, 32, 2, 4, 3)]
    return raw


def candidates(program, spec, K=None):
    """Tile configurations that fit shared memory, best guess first (the default). Overlapped
    tiles only where this kind can run the overlapped schedule (overlap_refusal); with the
    call's K, also where that schedule was measured to pay (backends/gpu/overlap.pays: short K,
    (M, N) inputs through the ring), for the autotuner to time beside the others."""
    raw = tiles(spec)
    if K is not None and spec.mainloop == "sm90" and overlap.pays(program, K, bool(spec.aux_tma) and spec.aux_ring):
        raw = raw + [TileConfig(128, 128, 64, stages=s, overlap=True) for s in (6, 5)]
    raw = [c for c in raw if not c.overlap or overlap_refusal(program, spec, c) is None]
    from .codegen.plan import tile_vectors
    if spec.aux_tma or spec.tma_extra or tile_vectors(program, spec):
        # the extra staging / aux / vector buffers cost pipeline stages rather than whole candidates
        fitted = []
        for c in raw:
            try:
                c = fit_stages(program, spec, c)
            except UnsupportedError:
                continue
            if c not in fitted:
                fitted.append(c)
        # a 2-stage ring starves the mainloop: such configurations only after all the others
        raw = [c for c in fitted if c.stages >= 3] + [c for c in fitted if c.stages < 3]
    fit = [c for c in raw if fits(program, spec, c)]
    if not fit:
        raise UnsupportedError(f"the epilogue needs more shared memory for its reduction buffers than a CTA has "
                               f"({len(program.reductions)} reductions); split the epilogue")
    return fit


def fits(program, spec, cfg):
    """The tile fits shared memory and, with aux inputs in the ring, the ring has a stage to spare
    beside a tile's aux stages."""
    ring_ok = spec.mainloop != "sm90" or ring_holds_aux(spec, cfg)
    return ring_ok and smem_bytes(program, spec, cfg) <= SMEM_LIMIT


def fit_stages(program, spec, cfg):
    """A forced tile with as many of its pipeline stages as shared memory allows (at least 2)."""
    import dataclasses
    while smem_bytes(program, spec, cfg) > SMEM_LIMIT and cfg.stages > 2:
        cfg = dataclasses.replace(cfg, stages=cfg.stages - 1)
    if not fits(program, spec, cfg):
        raise UnsupportedError(f"tile {cfg.label()} needs more shared memory than a CTA has for this epilogue")
    return cfg


def generate(program, spec, cfg):
    """The kernel's CUDA C++ source. An overlapped tile (cfg.overlap) this kind cannot run is an
    UnsupportedError naming why (overlap_refusal), never another schedule's kernel in its name."""
    if cfg.overlap:     # (here too: an sm80 spec never reaches sm90_overlap)
        overlap_require(program, spec, cfg)
    mod = sm90 if spec.mainloop == "sm90" else sm80
    return mod.generate(program, spec, cfg)


def overlap_or_cooperative(program, spec, cfg, report):
    """A forced tile as the overlapped schedule can take it: cfg where it can run this kind
    (or cfg.overlap is off), else the same tile cooperative, with the reason in `report`."""
    import dataclasses
    why = overlap_refusal(program, spec, cfg) if cfg.overlap else None
    if why is None:
        return cfg
    cfg = dataclasses.replace(cfg, overlap=False)
    report.append(f"tile {cfg.label()}: overlap=True not taken ({why}); cooperative schedule")
    return cfg
