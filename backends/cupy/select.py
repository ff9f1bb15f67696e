"""Per-call decisions: which mainloop and loaders a bound call's layouts allow (`decide_spec`),
and which tile configurations fit (`candidates`). Pure Python on pointers and strides, so it
runs on every call at microsecond cost and is unit-tested without a GPU.
"""
from evt_core.errors import UnsupportedError

from .codegen import sm80, sm90
from .codegen.plan import N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, Spec, TileConfig

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


def _rows16(ptr, row_stride, batch_stride, item):
    """TMA's rule: base and every outer stride 16-byte aligned."""
    return ptr % 16 == 0 and (row_stride * item) % 16 == 0 and (batch_stride * item) % 16 == 0


def _async_ok(ptr, row_stride, batch_stride, inner_extent, item):
    epc = 16 // item
    return ptr % 16 == 0 and row_stride % epc == 0 and batch_stride % epc == 0 and inner_extent % epc == 0


def decide_spec(program, bound, options, cc):
    """The Spec for this call. Raises UnsupportedError when mainloop="sm90" is forced on a call
    TMA cannot take, naming the operand and why."""
    dt = bound.dtype
    item = _ITEM[dt]
    (aL, aM, aK), (bL, bK, bN) = bound.a_strides, bound.b_strides
    pa, pb = bound.A.ptr, bound.B.ptr
    b_kmajor = bK == 1 and bN != 1
    a_tma = aK == 1 and _rows16(pa, aM, aL, item)
    b_tma = (_rows16(pb, bN, bL, item) if b_kmajor else bN == 1 and _rows16(pb, bK, bL, item))
    want = options["mainloop"]
    can90 = cc >= (9, 0) and cc < (10, 0) and dt != "float32" and a_tma and b_tma
    if want == "sm90" and not can90:
        why = ("fp32 inputs have no exact wgmma (use sm80)" if dt == "float32" else
               "the GPU is not sm_90" if not (9, 0) <= cc < (10, 0) else
               f"A (strides {bound.a_strides}) must be K-contiguous with 16-byte aligned rows" if not a_tma else
               f"B (strides {bound.b_strides}) needs unit stride along N or K and 16-byte aligned rows "
               f"(N % 8 == 0 / K % 8 == 0 for 16-bit data)")
        raise UnsupportedError(f"mainloop='sm90' cannot run this call: {why}; pass mainloop='auto' or 'sm80'")
    use90 = can90 and want in ("auto", "sm90")
    in_cls = tuple(n_class(t.strides, t.array.ptr, op.dtype) for t, op in zip(bound.inputs, program.inputs))
    out_cls = tuple(n_class(t.strides, t.array.ptr, op.dtype) for t, op in zip(bound.outputs, program.outputs))
    tma_out, tma_extra, aux_tma = -1, (), ()
    if use90:
        storable = []
        for i, (t, op) in enumerate(zip(bound.outputs, program.outputs)):
            sL, sM, sN = t.strides
            spans = program.spans(op)
            if (op.dtype != "float32" and spans[1] and spans[2] and (spans[0] or not program.batched or bound.L == 1)
                    and sN == 1 and _rows16(t.array.ptr, sM, sL, 2)):
                storable.append(i)
        if storable:
            tma_out = storable[0]
            if options.get("tma_store_all"):
                tma_extra = tuple(storable[1:])
        if options.get("aux_tma"):
            aux = []
            for i, (t, op) in enumerate(zip(bound.inputs, program.inputs)):
                sL, sM, sN = t.strides
                spans = program.spans(op)
                # row-major 16-bit M x N tiles with 16-byte aligned rows (TMA's rule); an input
                # without the L axis of a batched program is the same 2-D tile for every batch
                if (op.dtype != "float32" and spans[1] and spans[2] and sN == 1 and (sM != 0)
                        and _rows16(t.array.ptr, sM, sL if spans[0] else 0, 2)):
                    aux.append(i)
            aux_tma = tuple(aux)
    if use90:
        a_load = b_load = "tma"
    else:
        a_load = "async" if aK == 1 and _async_ok(pa, aM, aL, bound.K, item) else "scalar"
        inner = bound.K if b_kmajor else bound.N
        outer = bN if b_kmajor else bK
        unit = bK == 1 if b_kmajor else bN == 1
        b_load = "async" if unit and _async_ok(pb, outer, bL, inner, item) else "scalar"
    spec = Spec(dt, "sm90" if use90 else "sm80", a_load, b_load, b_kmajor, aL != 0, bL != 0,
                in_cls, out_cls, tma_out, bool(options["deterministic"]), tma_extra, aux_tma,
                bool(options.get("fast_math", False)))
    return _fit_options(program, spec)


def _fit_options(program, spec):
    """aux_tma / tma_store_all buffers that leave no candidate tile in shared memory (many aux
    inputs or outputs plus reduction buffers) are given up, last first: the call falls back to
    __ldg loads / direct stores for those tensors."""
    import dataclasses
    while spec.aux_tma or spec.tma_extra:
        try:
            candidates(program, spec)
            return spec
        except UnsupportedError:
            if spec.aux_tma:
                spec = dataclasses.replace(spec, aux_tma=spec.aux_tma[:-1])
            else:
                spec = dataclasses.replace(spec, tma_extra=spec.tma_extra[:-1])
    return spec


def smem_bytes(program, spec, cfg):
    mod = sm90 if spec.mainloop == "sm90" else sm80
    return mod.smem_bytes(program, spec, cfg)


def candidates(program, spec):
    """Tile configurations that fit shared memory, best guess first (the default)."""
    if spec.mainloop == "sm90":
        # ping-pong first: its epilogue overlaps the other consumer's mainloop (the cooperative
        # schedule leaves the tensor cores idle during every epilogue, 1.16-1.75x cuBLAS)
        raw = [TileConfig(64, 256, 64, stages=4, pingpong=True)]
        raw += [TileConfig(128, 128, 64, stages=s, pingpong=True) for s in (6, 5)]
        raw += [TileConfig(128, 256, 64, stages=s) for s in (4, 3)]
        raw += [TileConfig(128, 128, 64, stages=s) for s in (6, 5, 4)]
        raw += [TileConfig(128, 256, 64, stages=4, group_m=16)]
    elif spec.dtype == "float32":
        raw = [TileConfig(128, 128, 16, 2, 4, 4), TileConfig(64, 128, 16, 2, 4, 4), TileConfig(128, 64, 16, 4, 2, 4)]
    else:
        raw = [TileConfig(128, 128, 32, 2, 4, 4), TileConfig(128, 256, 32, 2, 4, 3),
               TileConfig(64, 128, 32, 2, 2, 4), TileConfig(128, 128, 32, 2, 4, 3)]
    if spec.aux_tma or spec.tma_extra:
        # the extra staging / aux buffers cost pipeline stages rather than whole candidates
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
    fit = [c for c in raw if smem_bytes(program, spec, c) <= SMEM_LIMIT]
    if not fit:
        raise UnsupportedError(f"the epilogue needs more shared memory for its reduction buffers than a CTA has "
                               f"({len(program.reductions)} reductions); split the epilogue")
    return fit


def fit_stages(program, spec, cfg):
    """A forced tile with as many of its pipeline stages as shared memory allows (at least 2)."""
    import dataclasses
    while smem_bytes(program, spec, cfg) > SMEM_LIMIT and cfg.stages > 2:
        cfg = dataclasses.replace(cfg, stages=cfg.stages - 1)
    if smem_bytes(program, spec, cfg) > SMEM_LIMIT:
        raise UnsupportedError(f"tile {cfg.label()} needs more shared memory than a CTA has for this epilogue")
    return cfg


def generate(program, spec, cfg):
    mod = sm90 if spec.mainloop == "sm90" else sm80
    return mod.generate(program, spec, cfg)
