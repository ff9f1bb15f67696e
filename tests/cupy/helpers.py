"""Specs for canonical layouts, so compile checks need no arrays and no GPU."""
from evt_backends.cupy.codegen.plan import N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, Spec


def canonical_spec(program, dtype, mainloop, *, b_kmajor=False, loads="fast", deterministic=False, classes=None,
                   aux_tma=False, tma_store_all=False, fast_math=False):
    """Row-major aligned operands (`loads="fast"`: TMA on sm90, cp.async on sm80) or scalar
    loaders (`loads="scalar"`); `classes` overrides every aux tensor's N class. The three
    options mirror the backend's: with every tensor row-major and aligned, every 16-bit M x N
    output / input qualifies (`classes=N_GENERIC` marks the aux inputs as not unit-stride)."""
    def cls(ops):
        if classes:
            return tuple(classes if "N" in o.dims else N_BROADCAST for o in ops)
        return tuple(N_UNIT_PAIR if "N" in o.dims else N_BROADCAST for o in ops)
    tma_out = -1
    if mainloop == "sm90":
        tma_out = next((i for i, o in enumerate(program.outputs)
                        if o.dtype != "float32" and "M" in o.dims and "N" in o.dims
                        and ("L" in o.dims or not program.batched)), -1)
    tma_extra, aux = (), ()
    if mainloop == "sm90" and tma_store_all and tma_out >= 0:
        tma_extra = tuple(i for i, o in enumerate(program.outputs)
                          if i > tma_out and o.dtype != "float32" and "M" in o.dims and "N" in o.dims
                          and not o.order and ("L" in o.dims or not program.batched))
    if mainloop == "sm90" and aux_tma and classes in (None, N_UNIT_PAIR):
        aux = tuple(i for i, o in enumerate(program.inputs) if o.dtype != "float32" and "M" in o.dims and "N" in o.dims)
    load = "tma" if mainloop == "sm90" else ("async" if loads == "fast" else "scalar")
    return Spec(dtype, mainloop, load, load, b_kmajor, program.batched, program.batched,
                cls(program.inputs), cls(program.outputs), tma_out, deterministic, tma_extra, aux, fast_math)


ALL_CLASSES = (N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR)


def default_spec(program, dtype="float16", M=4096, N=3072, K=768, L=1):
    """The Spec decide_spec gives a call with row-major, 1 KB-aligned operands under the
    backend's default options (the fast paths on), on an sm_90 device."""
    from types import SimpleNamespace

    from evt_backends.cupy.backend import CupyBackend
    from evt_backends.cupy.select import decide_spec
    L = L if program.batched else 1

    def frame(op):
        sL, sM, sN = program.spans(op)
        return SimpleNamespace(array=SimpleNamespace(ptr=1 << 20),
                               strides=(M * N if sL else 0, N if sM else 0, 1 if sN else 0))
    bound = SimpleNamespace(L=L, M=M, N=N, K=K, A=SimpleNamespace(ptr=1 << 20), B=SimpleNamespace(ptr=1 << 20),
                            a_strides=(M * K if program.batched else 0, K, 1),
                            b_strides=(K * N if program.batched else 0, N, 1), dtype=dtype,
                            inputs=[frame(o) for o in program.inputs], outputs=[frame(o) for o in program.outputs],
                            reductions=[], scalars=[])
    return decide_spec(program, bound, dict(CupyBackend.options), (9, 0))
