"""The op table the partitioner reads: views over the one ATen registry (`aten/`), keyed by
ATen name. `OPS[name]` is the op's `OpDef` (kind, signature, shape rule, NumPy, tree node);
`ALIASES` maps accepted spellings to ATen names, `DEFAULTS` gives omitted attributes."""
from __future__ import annotations

from .aten import ALIASES, REGISTRY, Kind, OpDef

OPS: dict[str, OpDef] = REGISTRY
DEFAULTS = {name: d.defaults for name, d in REGISTRY.items() if d.defaults}

GEMMS = frozenset({"mm", "bmm", "addmm"})
# Layout ops a GEMM absorbs as operand strides when they feed it directly (design doc 4.6).
LAYOUT_INTO_GEMM = frozenset({"permute", "transpose", "t"})
# ops that move or view elements without computing (aten/structural.py): they may leave the
# accumulator's frame (a column split's selects, a peeled view), so rules.fits_frame skips them
RESHAPING = LAYOUT_INTO_GEMM | {"view", "expand", "unsqueeze", "squeeze", "select", "select_backward", "getitem"}


def kind_of(op: str) -> Kind:
    if op == "input":
        return Kind.INPUT
    info = OPS.get(op)
    return info.kind if info else Kind.OPAQUE


__all__ = ["OPS", "ALIASES", "DEFAULTS", "GEMMS", "LAYOUT_INTO_GEMM", "Kind", "OpDef", "kind_of"]
