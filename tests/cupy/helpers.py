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
