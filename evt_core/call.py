"""Checking the arguments of a call `kernel(A, B, **inputs)` / `interpret(tree, A, B, **inputs)`
before any backend sees them, so every backend gets the same typed errors and the same
normalised values.

Invariant of `normalize_call`'s result: A and B are given; every run-time scalar of the Program
is a Python float (Python and NumPy numbers and 0-d arrays are accepted; strings, bools,
complex numbers and arrays with more than one element are refused); no argument is a masked
array; no NumPy array has a negative or misaligned stride (those are copied, see `_plain`);
anything else is left for `evt_core.bind.bind` to check against the Program.
"""
import math
import numbers

import numpy as np

from .errors import ArgumentError, ShapeError

FP32_MAX = float(np.finfo(np.float32).max)


def normalize_call(program, args, inputs, what="kernel"):
    """(A, B, inputs) from a call's positional `args` and keyword `inputs`."""
    inputs = dict(inputs)
    if len(args) > 2:
        aux = [p for p in program.params if p != "accum"]
        extra = len(args) - 2
        hint = ", ".join(f"{n}=..." for n in aux[:extra]) or "..."
        raise ArgumentError(f"{what}(A, B, ...) got {extra} extra positional argument{'s' * (extra > 1)}; "
                            f"aux inputs and scalars are passed by name: {what}(A, B, {hint}) "
                            f"(the traced function takes {aux})")
    given = list(args)
    for name in ("A", "B")[len(given):]:     # A= and B= by name are fine (both are reserved names)
        given.append(inputs.pop(name, None))
    for name in ("A", "B"):
        if name in inputs:
            raise ArgumentError(f"{what}() got {name} both positionally and as {name}=")
    A, B = given
    for name, x in (("A", A), ("B", B)):
        if x is None:
            raise ArgumentError(f"{what}(A, B, **inputs) is missing {name}, the GEMM's "
                                f"{'left (M, K)' if name == 'A' else 'right (K, N)'} operand")
        if not hasattr(x, "shape"):
            raise ShapeError(f"{name} must be an array (NumPy, CuPy, torch or a CUDA array), got "
                             f"{type(x).__name__}; pass np.asarray({name}, np.float16) or similar")
        _refuse_masked(name, x)
    A, B = _plain(A), _plain(B)
    scalars = program.scalars
    for name, v in inputs.items():
        if name in scalars:
            inputs[name] = scalar_value(name, v)
        else:
            _refuse_masked(f"input {name!r}", v)
            inputs[name] = _plain(v)
    return A, B, inputs


def scalar_value(name, v):
    """The float value of run-time scalar `name`, or ArgumentError saying what to pass."""
    if type(v) is float:        # the common case, first: this runs on every call
        return _in_fp32_range(name, v)
    if isinstance(v, (bool, np.bool_)):
        raise ArgumentError(f"scalar {name!r} is the bool {v!r}; pass a number ({name}={float(v)!r})")
    if isinstance(v, numbers.Real):
        return _in_fp32_range(name, float(v))
    if hasattr(v, "shape") and hasattr(v, "dtype"):     # NumPy, CuPy, torch
        if tuple(v.shape) == () and _real_kind(v.dtype):
            return _in_fp32_range(name, float(v))
        raise ArgumentError(f"scalar {name!r} is an array of shape {tuple(v.shape)} and dtype {v.dtype}; "
                            f"pass a Python number (or a 0-d real array) for it, or re-trace with an "
                            f"array example to make {name!r} a tensor input")
    if isinstance(v, str):
        raise ArgumentError(f"scalar {name!r} is the string {v!r}; pass a number, e.g. {name}=float({v!r})")
    raise ArgumentError(f"scalar {name!r} must be a real number, got {type(v).__name__} {v!r}")


def _in_fp32_range(name, v):
    """Scalars are passed to kernels as fp32: a finite value beyond its range would be inf."""
    if math.isfinite(v) and abs(v) > FP32_MAX and math.isinf(_as_fp32(v)):
        raise ArgumentError(f"scalar {name!r} = {v!r} is beyond float32's range (+-3.4e38); kernels take "
                            "scalars as float32, where it would be inf")
    return v


def _as_fp32(v):
    with np.errstate(over="ignore"):
        return float(np.float32(v))


def _real_kind(dt):
    """True for float and (unsigned) integer dtypes of NumPy, CuPy or torch (bfloat16 too)."""
    name = str(dt).replace("torch.", "")
    if name == "bfloat16":
        return True
    try:
        return np.dtype(name).kind in "fiu"
    except TypeError:
        return False


def _plain(x):
    """A NumPy array every backend can bind as is: np.matrix as the ndarray over the same
    memory, and a row-major copy of an array with a negative stride (a reversed view) or a byte
    stride that is not a multiple of its item size (a view of a packed record) — GPU backends
    copy host arrays to the device anyway, and these two layouts are the ones a byte-for-byte
    device mirror cannot reproduce. Other objects pass through."""
    if not isinstance(x, np.ndarray):
        return x
    if isinstance(x, np.matrix):
        x = np.asarray(x)
    if any(s < 0 or s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    return x


def _refuse_masked(what, x):
    if isinstance(x, np.ndarray) and isinstance(x, np.ma.MaskedArray):   # np.ma only for NumPy arrays
        raise ArgumentError(f"{what} is a masked array; kernels read every element and would ignore the mask. "
                            f"Pass x.filled(value) (or np.ma.getdata(x) to use the data as is)")
