"""Shape inference: the one definition of how each node's example shape follows from its
operands (NumPy broadcasting for elementwise ops, transpose/reshape for layout ops, keepdims in
the rank-3 (L, M, N) frame for reductions). Used by the tracer as nodes are built, so errors
point at the user's line, and by the shape-propagation pass."""
import math

import numpy as np

from ..errors import ShapeError, TraceError
from .ir import describe
from .ops import AXES, ELEMENTWISE, Op, REDUCTIONS


def infer_shape(op, src, arg, problem):
    """Shape of `op(*src)` given the operands' shapes; `problem` is the traced (L, M, N)."""
    if op in ELEMENTWISE:
        shapes = [s.shape for s in src]
        try:
            return tuple(np.broadcast_shapes(*shapes))
        except ValueError:
            a, b = _first_clash(src)
            raise ShapeError(f"operands do not broadcast in {op.value}: {describe(a)} has shape {a.shape} "
                             f"and {describe(b)} has shape {b.shape}") from None
    if op is Op.PERMUTE:
        (x,) = src
        if sorted(arg) != list(range(len(x.shape))):
            raise TraceError(f"permute({describe(x)}, {arg}): dims must be a permutation of 0..{len(x.shape) - 1} "
                             f"for a value of shape {x.shape}")
        return tuple(x.shape[d] for d in arg)
    if op is Op.RESHAPE:
        (x,) = src
        return resolve_reshape(x, arg)
    if op in REDUCTIONS:
        (x,) = src
        frame = (1,) * (3 - len(x.shape)) + tuple(x.shape)
        full = tuple(np.broadcast_shapes(frame, tuple(problem)))
        return tuple(1 if a in arg else e for a, e in zip(AXES, full))
    raise AssertionError(op)  # leaves and sinks carry their own shapes


def _first_clash(src):
    for i, a in enumerate(src):
        for b in src[i + 1:]:
            try:
                np.broadcast_shapes(a.shape, b.shape)
            except ValueError:
                return a, b
    return src[0], src[-1]


def resolve_reshape(x, shape):
    size = math.prod(x.shape)
    if sum(e == -1 for e in shape) > 1 or any(e < -1 or e == 0 for e in shape):
        raise TraceError(f"reshape({describe(x)}, {shape}): extents must be positive, with at most one -1")
    known = math.prod(e for e in shape if e != -1)
    new = tuple(size // known if e == -1 else e for e in shape)
    if math.prod(new) != size:
        raise ShapeError(f"cannot reshape {describe(x)} of shape {x.shape} ({size} elements) to {shape}")
    return new


def fits_problem(shape, problem):
    """True if a value of `shape` broadcasts into the problem frame without growing it."""
    frame = (1,) * (3 - len(shape)) + tuple(shape) if len(shape) <= 3 else None
    return frame is not None and all(e in (1, p) for e, p in zip(frame, problem))
