"""Host-side binding of a call `kernel(A, B, **inputs)` to a Program: the one place where user
arrays meet the problem frame. Every backend and the reference interpreter bind through here,
so shape checks, dtype checks, layout views and output allocation mean the same everywhere.

Arrays are duck-typed: anything with `.shape`, `.strides` (bytes) and `.dtype` (NumPy, CuPy,
Numba device arrays). Output allocation is the backend's: `alloc(shape, dtype_name, strides)`
returns an array with exactly those element strides.
"""
import math
import os
from dataclasses import dataclass

import numpy as np

from .call import scalar_value
from .dtypes import DTYPES, dtype_name
from .env import flag
from .errors import DTypeError, ResourceError, ShapeError, UnsupportedError


@dataclass
class Tensor:
    """A bound operand: the array object and its element strides on the (L, M, N) frame
    (0 on every axis it does not span)."""
    array: object
    strides: tuple


@dataclass
class Bound:
    L: int
    M: int
    N: int
    K: int
    A: object
    B: object
    a_strides: tuple          # (L, M, K) element strides of A, L stride 0 if A is shared
    b_strides: tuple          # (L, K, N) element strides of B
    dtype: str                # dtype of A and B
    inputs: list
    scalars: list
    outputs: list
    reductions: list
    result: dict              # returned name -> user-facing array


def element_strides(x, what):
    item = np.dtype(x.dtype).itemsize
    out = []
    for s in x.strides:
        if s % item:
            raise ShapeError(f"{what} has byte strides {tuple(x.strides)} that are not multiples of its "
                             f"item size {item}; pass a contiguous copy")
        out.append(s // item)
    return tuple(out)


def view_strides(shape, strides, view):
    """Apply layout steps to (shape, element strides). Returns (shape, strides) of the view, or
    None when a reshape cannot be expressed as strides (the data would need a copy)."""
    shape, strides = tuple(shape), tuple(strides)
    for kind, arg in view:
        if kind == "place":   # put dim i at frame position arg[i] of a rank-3 frame
            fs, ft = [1, 1, 1], [0, 0, 0]
            for d, p in enumerate(arg):
                fs[p], ft[p] = shape[d], strides[d]
            shape, strides = tuple(fs), tuple(ft)
        elif kind == "pad":     # prepend arg unit dims
            shape, strides = (1,) * arg + shape, (0,) * arg + strides
        elif kind == "broadcast":   # stretch unit dims to arg with stride 0
            strides = tuple(0 if e != t else s for e, t, s in zip(shape, arg, strides))
            shape = tuple(arg)
        elif kind == "permute":
            shape, strides = tuple(shape[d] for d in arg), tuple(strides[d] for d in arg)
        elif kind == "reshape":
            new = _resolve(arg, math.prod(shape))
            st = _split(shape, strides, new)
            if st is None:
                return None
            shape, strides = new, st
        else:  # pragma: no cover - the IR builds only these
            raise ValueError(kind)
    return shape, tuple(0 if e == 1 else s for e, s in zip(shape, strides))


def _resolve(shape, size):
    known = math.prod(e for e in shape if e != -1)
    return tuple(size // known if e == -1 and known else e for e in shape)


def _split(shape, strides, new):
    """NumPy's no-copy reshape rule (_attempt_nocopy_reshape): walk both shapes in blocks of
    equal element count; a block is expressible only if its source dims are contiguous."""
    old = [(e, s) for e, s in zip(shape, strides) if e != 1]
    res = [0] * len(new)
    oi = ni = 0
    while oi < len(old) and ni < len(new):
        if new[ni] == 1:
            ni += 1; continue
        np_, op_ = new[ni], old[oi][0]
        nj, oj = ni + 1, oi + 1
        while np_ != op_:
            if np_ < op_:
                np_ *= new[nj]; nj += 1
            else:
                op_ *= old[oj][0]; oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][1] * old[k + 1][0]:
                return None
        res[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            res[k - 1] = res[k] * new[k]
        ni, oi = nj, oj
    return tuple(res)


def problem_shape(program, A, B):
    """(L, M, N, K) and the A/B strides from the operands, with ShapeError on any mismatch."""
    for what, x in (("A", A), ("B", B)):
        if not hasattr(x, "shape") or len(x.shape) not in (2, 3):
            raise ShapeError(f"{what} must be a 2-D or 3-D array, got {getattr(x, 'shape', type(x).__name__)}")
    da, db = dtype_name(A.dtype, "A"), dtype_name(B.dtype, "B")
    if da != db:
        raise DTypeError(f"A is {da} but B is {db}; pass both in the same dtype")
    (La, M, Ka), (Lb, Kb, N) = _batch(A.shape), _batch(B.shape)
    if Ka != Kb:
        raise ShapeError(f"A has K={Ka} (shape {tuple(A.shape)}) but B has K={Kb} (shape {tuple(B.shape)})")
    if La != Lb and 1 not in (La, Lb) or (len(A.shape) == 3 and len(B.shape) == 3 and La != Lb):
        raise ShapeError(f"A has batch {La} (shape {tuple(A.shape)}) but B has batch {Lb} (shape {tuple(B.shape)})")
    batched = len(A.shape) == 3 or len(B.shape) == 3
    if batched != program.batched:
        want = "3-D (L, M, K)/(L, K, N)" if program.batched else "2-D (M, K) and (K, N)"
        raise ShapeError(f"the tree was traced with a {'batched' if program.batched else 'rank-2'} accum; "
                         f"pass {want} operands (got A {tuple(A.shape)}, B {tuple(B.shape)})")
    L = max(La, Lb)
    for axis, e in zip("LMNK", (L, M, N, Ka)):
        if e == 0:
            raise ShapeError(f"the problem has {axis}=0 (A {tuple(A.shape)}, B {tuple(B.shape)}); "
                             "every extent must be at least 1")
    if program.specialised and (L, M, N) != tuple(program.problem):
        raise ShapeError(f"this tree reshapes to literal extents and is specialised on (L, M, N) = "
                         f"{tuple(program.problem)}; got {(L, M, N)}. Re-trace it for the new shape")
    sa, sb = element_strides(A, "A"), element_strides(B, "B")
    a_str = (sa[0] if len(sa) == 3 and La > 1 else 0,) + sa[-2:]
    b_str = (sb[0] if len(sb) == 3 and Lb > 1 else 0,) + sb[-2:]
    return (L, M, N, Ka), a_str, b_str, da


def _batch(shape):
    return tuple(shape) if len(shape) == 3 else (1,) + tuple(shape)


def expected_shape(op, extents):
    return tuple(extents[d] if isinstance(d, str) else d for d in op.dims)


def frame_strides(op, x, what):
    """Bind a user array to the frame: check shape, return its (L, M, N) element strides."""
    got = element_strides(x, what)
    v = view_strides(tuple(x.shape), got, op.view)
    if v is None:
        return None
    return v[1]


def bind(program, A, B, inputs, alloc, fill=None, upload=None):
    """Check a call against `program` and allocate its outputs. Raises ShapeError/DTypeError
    naming the offending input; unknown keyword names raise ShapeError too (a typo would
    otherwise silently leave a parameter unbound).

    With EVT_POISON=1 in the environment, every output is filled with NaN through
    `fill(array, value)` before the kernel runs, so tests catch elements a kernel never writes
    and reductions a kernel never initialises.

    `upload(array, what)`, when given, moves NumPy inputs to the backend's device after their
    checks (and after a frame copy where their layout needs one)."""
    (L, M, N, K), a_str, b_str, dt = problem_shape(program, A, B)
    ext = {"L": L, "M": M, "N": N}
    known = set(program.params) - {"accum"}
    for name in inputs:
        if name not in known:
            raise ShapeError(f"unexpected input {name!r}; the traced function takes {sorted(known)}")
    bound_in = []
    for op in program.inputs:
        if op.name not in inputs:
            raise ShapeError(f"missing input {op.name!r}: pass it as kernel(A, B, {op.name}=...)")
        x = inputs[op.name]
        if not hasattr(x, "shape") or not hasattr(x, "strides"):
            raise ShapeError(f"input {op.name!r} must be an array, got {type(x).__name__}")
        if dtype_name(x.dtype, f"input {op.name!r}") != op.dtype:
            raise DTypeError(f"input {op.name!r} has dtype {np.dtype(x.dtype)} but the tree was traced with {op.dtype}; "
                             f"cast it or re-trace")
        want = expected_shape(op, ext)
        if tuple(x.shape) != want:
            raise ShapeError(f"input {op.name!r} has shape {tuple(x.shape)} but the tree expects {want} "
                             f"(dims {op.dims} at (L, M, N) = {(L, M, N)})")
        bound_in.append(_bind_input(op, x, upload))
    scalars = []
    for name in program.scalars:
        if name not in inputs:
            raise ShapeError(f"missing scalar {name!r}: pass it as kernel(A, B, {name}=0.5)")
        scalars.append(scalar_value(name, inputs[name]))
    poison = fill if flag("EVT_POISON") else None
    outs = [_allocate(op, ext, alloc, poison) for op in program.outputs]
    reds = [_allocate(r.operand, ext, alloc, poison) for r in program.reductions]
    by_name = {op.name: t.array for op, t in zip(program.outputs, outs)}
    by_name.update({r.name: t.array for r, t in zip(program.reductions, reds)})
    result = {n: by_name[n] for n in program.result_names}
    return Bound(L, M, N, K, A, B, a_str, b_str, dt, bound_in, scalars, outs, reds, result)


def _bind_input(op, x, upload):
    """Tensor of input `op`: its frame strides, through a frame-shaped copy when no strides
    can express its layout (a reshape of a permuted array)."""
    what = f"input {op.name!r}"
    view = op
    if frame_strides(op, x, what) is None:
        x, view = _frame_copy(x, op, what), _FRAME_VIEW
    if upload is not None and isinstance(x, np.ndarray):
        host, x = x, upload(x, what)
        if frame_strides(view, x, what) is None:   # the upload changed its strides
            x, view = upload(_frame_copy(host, view, what) if view is op else host, what), _FRAME_VIEW
    return Tensor(x, frame_strides(view, x, what))


def _allocate(op, ext, alloc, poison):
    shape = expected_shape(op, ext)
    strides = output_strides(op, shape)
    if strides is None:   # pragma: no cover - tracing refuses such outputs (layout elimination)
        raise UnsupportedError(f"output {op.name!r}: its layout {op.view} cannot be written through strides; "
                               "return the value in the accumulator's layout and reshape it afterwards")
    arr = _alloc(alloc, op, shape, strides)
    st = frame_strides(op, arr, f"output {op.name!r}")
    if poison is not None:
        poison(arr, float("nan"))
    return Tensor(arr, st)


def _alloc(alloc, op, shape, strides):
    nbytes = math.prod(shape) * DTYPES[op.dtype].itemsize
    if nbytes > _ALLOC_LIMIT:    # an overcommitting host would "allocate" it, then die filling it
        raise ResourceError(f"output {op.name!r} of shape {shape} ({op.dtype}) needs {nbytes / 2 ** 30:.1f} GiB, "
                            "more than this machine's memory; split the problem (e.g. along M)")
    try:
        return alloc(shape, op.dtype, strides)
    except MemoryError:      # NumPy's, CuPy's OutOfMemoryError and torch's are all MemoryErrors
        nbytes = math.prod(shape) * DTYPES[op.dtype].itemsize
        raise ResourceError(f"output {op.name!r} of shape {shape} ({op.dtype}) needs {nbytes / 2 ** 30:.1f} GiB, "
                            "more than can be allocated; split the problem (e.g. along M)") from None


def _memory_limit():
    """Twice the host's physical memory: no host or device array of a real problem is larger."""
    try:
        return 2 * os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 2 ** 50


_ALLOC_LIMIT = _memory_limit()


def order_strides(shape, order=()):
    """Dense element strides of `shape` with its dims laid out outermost to innermost as
    `order` (row-major when empty)."""
    strides, step = [0] * len(shape), 1
    for d in reversed(order or range(len(shape))):
        strides[d] = step
        step *= shape[d]
    return tuple(strides)


def output_strides(op, shape):
    """The element strides an output is allocated with: the traced example's dim order, or
    row-major where that order cannot carry the output's view; None where neither can (the
    layout merges permuted dims)."""
    for strides in (order_strides(shape, op.order), order_strides(shape)):
        if view_strides(shape, strides, op.view) is not None:
            return strides
    return None


class _FrameView:
    """The view of an array already in the (L, M, N) frame."""
    view = ()


_FRAME_VIEW = _FrameView()


def _frame_copy(x, op, what):
    """The input laid out in the (L, M, N) frame, for a layout that strides cannot express
    (a reshape of a permuted or otherwise non-contiguous array). NumPy arrays get the copy,
    made by applying the traced layout ops themselves; device arrays are refused, since a
    hidden device copy would be a surprise in a fused kernel's call."""
    if not isinstance(x, np.ndarray):
        raise ShapeError(f"{what} has shape {tuple(x.shape)} and strides {tuple(x.strides)} that the traced "
                         f"layout {op.view} cannot view without a copy; pass a contiguous array, or apply the "
                         "layout ops to it before the call and trace with the result")
    y = x
    for kind, arg in op.view:
        if kind == "pad":
            y = y.reshape((1,) * arg + y.shape)
        elif kind == "broadcast":
            y = np.broadcast_to(y, tuple(arg))
        elif kind == "permute":
            y = y.transpose(arg)
        elif kind == "reshape":
            y = y.reshape(_resolve(arg, y.size))
        elif kind == "place":   # dim d to frame position arg[d]; unit dims fill the rest
            rest = iter(range(y.ndim, 3))
            y = y.reshape(y.shape + (1,) * (3 - y.ndim))
            src = [None] * 3
            for d, p in enumerate(arg):
                src[p] = d
            y = y.transpose([d if d is not None else next(rest) for d in src])
    return np.ascontiguousarray(y)


def numpy_alloc(shape, dtype, strides):
    dt = DTYPES[dtype]
    size = 1 + sum((e - 1) * s for e, s in zip(shape, strides)) if all(shape) else 0
    try:
        base = np.empty(max(size, 1), dt)
    except ValueError as e:     # "array is too big": beyond the address space, i.e. out of memory
        raise MemoryError(str(e)) from None
    return np.lib.stride_tricks.as_strided(base, shape, tuple(s * dt.itemsize for s in strides), writeable=True)
