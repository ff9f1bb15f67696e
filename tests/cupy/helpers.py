"""Specs for canonical layouts, so compile checks need no arrays and no GPU."""
from evt_backends.cupy.codegen.plan import N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, Spec


def canonical_spec(program, dtype, mainloop, *, b_kmajor=False, loads="fast", deterministic=False, classes=None):
    """Row-major aligned operands (`loads="fast"`: TMA on sm90, cp.async on sm80) or scalar
    loaders (`loads="scalar"`); `classes` overrides every aux tensor's N class."""
    def cls(ops):
        if classes:
            return tuple(classes if "N" in o.dims else N_BROADCAST for o in ops)
        return tuple(N_UNIT_PAIR if "N" in o.dims else N_BROADCAST for o in ops)
    tma_out = -1
    if mainloop == "sm90":
        tma_out = next((i for i, o in enumerate(program.outputs)
                        if o.dtype != "float32" and "M" in o.dims and "N" in o.dims
                        and ("L" in o.dims or not program.batched)), -1)
    load = "tma" if mainloop == "sm90" else ("async" if loads == "fast" else "scalar")
    return Spec(dtype, mainloop, load, load, b_kmajor, program.batched, program.batched,
                cls(program.inputs), cls(program.outputs), tma_out, deterministic)


ALL_CLASSES = (N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR)
