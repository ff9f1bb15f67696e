"""Tensor types of graph values: a static shape and a dtype name. Edge weights are the bytes
of these types, so every node carries them (inferred for known ops, declared for opaque ones)."""
from __future__ import annotations

from dataclasses import dataclass
from math import prod

import numpy as np

from .errors import check

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int64": 8, "int32": 4,
             "int8": 1, "uint8": 1, "bool": 1}


@dataclass(frozen=True, slots=True)
class TensorType:
    shape: tuple[int, ...]
    dtype: str

    @property
    def nbytes(self) -> int:
        return prod(self.shape) * _ITEMSIZE[self.dtype]

    def numpy_dtype(self):
        # NumPy has no bfloat16; the reference evaluator rounds through float32 for it.
        return np.float32 if self.dtype == "bfloat16" else np.dtype(self.dtype)


def make_type(shape, dtype, who: str = "?") -> TensorType:
    check(isinstance(dtype, str) and dtype in _ITEMSIZE, "dtype",
          f"unknown dtype {dtype!r}; use one of {sorted(_ITEMSIZE)}", (who,))
    ok = isinstance(shape, (tuple, list)) and all(isinstance(s, int) and not isinstance(s, bool) for s in shape)
    check(ok, "shape", f"a shape is a tuple of ints, got {shape!r}", (who,))
    shape = tuple(int(s) for s in shape)
    check(all(s >= 0 for s in shape), "shape", f"negative extent in {shape}", (who,))
    return TensorType(shape, dtype)


def is_float(dtype: str) -> bool:
    return dtype in ("float16", "bfloat16", "float32", "float64")


def broadcast(shapes, who: str = "?") -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        check(False, "shape", f"operand shapes {list(shapes)} do not broadcast", (who,))
