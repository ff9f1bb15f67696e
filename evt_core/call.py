"""Checking the arguments of a call `kernel(A, B, **inputs)` / `interpret(tree, A, B, **inputs)`
before any backend sees them, so every backend gets the same typed errors and the same
normalised values.

Invariant of `normalize_call`'s result: A and B are given; every run-time scalar of the Program
is a Python float (Python and NumPy numbers and 0-d arrays are accepted; strings, bools,
complex numbers and arrays with more than one element are refused); no argument is a masked
array; no NumPy array has a negative or misaligned stride (those are copied, see `_plain`);
anything else is left for `evt_core.bind.bind` to check against the Program.

`fast_signature` is the other way in, for the repeated call: it admits only calls that
normalize_call would hand on unchanged, so a backend may skip normalize_call for them (see
evt_core.backend.Kernel.__call__).
"""
import math
import numbers
import os

import numpy as np

from .dtypes import is_finite
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
        return _in_fp32_range(name, _as_float(name, v))
    if hasattr(v, "shape") and hasattr(v, "dtype"):     # NumPy, CuPy, torch
        if tuple(v.shape) == () and _real_kind(v.dtype):
            return _in_fp32_range(name, _as_float(name, v[()] if isinstance(v, np.ndarray) else float(v)))
        raise ArgumentError(f"scalar {name!r} is an array of shape {tuple(v.shape)} and dtype {v.dtype}; "
                            f"pass a Python number (or a 0-d real array) for it, or re-trace with an "
                            f"array example to make {name!r} a tensor input")
    if isinstance(v, str):
        raise ArgumentError(f"scalar {name!r} is the string {v!r}; pass a number, e.g. {name}=float({v!r})")
    raise ArgumentError(f"scalar {name!r} must be a real number, got {type(v).__name__} {v!r}")


def _in_fp32_range(name, v):
    """Scalars are passed to kernels as fp32: a finite value beyond its range would be inf."""
    if math.isfinite(v) and abs(v) > FP32_MAX and math.isinf(_as_fp32(v)):
        raise ArgumentError(_beyond_fp32(name, v))
    return v


def _as_float(name, v):
    """float(v) of a real number; an int or Fraction beyond even float64's range (float()
    raises OverflowError) is refused like any other finite value beyond float32's."""
    try:
        with np.errstate(over="ignore"):
            f = float(v)
    except OverflowError:
        raise ArgumentError(_beyond_fp32(name, v)) from None
    if math.isinf(f) and is_finite(v):      # a NumPy long double beyond float64's range
        raise ArgumentError(_beyond_fp32(name, v))
    return f


def _beyond_fp32(name, v):
    return (f"scalar {name!r} = {number_text(v)} is beyond float32's range (+-3.4e38); kernels take "
            "scalars as float32, where it would be inf")


def number_text(x):
    """repr(x) for an error message, but a huge int or Fraction as its order of magnitude: its
    repr has hundreds of digits, and past 4300 digits int's str limit makes repr itself raise."""
    try:
        f = float(x)
    except OverflowError:
        n = int(abs(x))                 # math.log10 takes ints of any size
        m = math.log10(n)
        return f"~{'-' if x < 0 else ''}{10 ** (m % 1):.3g}e+{int(m)}"
    return f"~{f:.3g}" if isinstance(x, numbers.Rational) and abs(f) >= 1e16 else repr(x)


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
    if any(s < 0 and e < 2 for e, s in zip(x.shape, x.strides)):
        # an axis with one element reads no stride, and NumPy flags such a view contiguous
        # (ascontiguousarray returns it as is): give it the stride's magnitude instead
        x = np.lib.stride_tricks.as_strided(x, strides=tuple(abs(s) if e < 2 else s for e, s in zip(x.shape, x.strides)),
                                            writeable=x.flags.writeable)
    if any(s < 0 or s % x.itemsize for s in x.strides):
        x = np.ascontiguousarray(x)
    return x


def _refuse_masked(what, x):
    if isinstance(x, np.ndarray) and isinstance(x, np.ma.MaskedArray):   # np.ma only for NumPy arrays
        raise ArgumentError(f"{what} is a masked array; kernels read every element and would ignore the mask. "
                            f"Pass x.filled(value) (or np.ma.getdata(x) to use the data as is)")


def fast_signature(A, B, inputs):
    """(key, values) of a call `kernel(A, B, **inputs)` that normalize_call passes unchanged,
    or None for any other call (which then takes normalize_call and the checked path).

    Admitted: A, B and every array input CUDA torch tensors or CuPy arrays (no masks, no host
    copies), every other input a Python float within float32's range (what scalar_value
    returns as is). key holds per array (shape, strides, dtype, device, 16-byte alignment) and
    every input's name, in call order; values the arrays' data pointers and the floats, in the
    same order. Which names are scalars is not checked: a backend may only replay a key that a
    fully checked call produced (its names then passed bind)."""
    pa, pb = _part_of(type(A))(A), _part_of(type(B))(B)
    if pa is None or pb is None:
        return None
    key, values = [pa[0], pb[0]], [pa[1], pb[1]]
    for name, v in inputs.items():
        if type(v) is float:       # a name alone: a str never equals an array's (name, part)
            if abs(v) > FP32_MAX and math.isfinite(v):
                return None        # scalar_value refuses it or rounds it: the checked path decides
            key.append(name)
            values.append(v)
            continue
        part = _part_of(type(v))(v)
        if part is None:
            return None
        key.append((name, part[0]))
        values.append(part[1])
    return tuple(key), values


_PARTS = {}     # type -> its function (x -> (key part, pointer) or None): classified once per type


def _part_of(t):
    f = _PARTS.get(t)
    if f is None:     # the library by top-level module, as backends/gpu/arrays.array_kind decides
        lib = t.__module__.partition(".")[0]
        f = _PARTS[t] = _torch_part if lib == "torch" else _cupy_part if lib == "cupy" else _no_part
    return f


def _torch_part(x):
    if not x.is_cuda:
        return None
    p = x.data_ptr()
    return (x.shape, x.stride(), x.dtype, x.device, p & 15 == 0), p


def _cupy_part(x):
    p = x.data.ptr
    return (x.shape, x.strides, x.dtype, x.device.id, p & 15 == 0), p


def _no_part(x):
    return None


# EVT_POISON=1 (evt_core.env's flag: outputs NaN-filled first), read on every call as a lookup in
# os.environ's own store: os.environ.get costs ~1.7 us when the variable is unset (a KeyError
# raised and caught), too much for the repeated-call path. Writes through os.environ (tests'
# monkeypatch.setenv included) update that store, so every call still sees the current value.
_ON = os.environ.encodevalue("1") if hasattr(os.environ, "encodevalue") else "1"
_POISON = os.environ.encodekey("EVT_POISON") if hasattr(os.environ, "encodekey") else "EVT_POISON"


def poison_requested():
    """True when EVT_POISON is "1" (bind warns once about any other non-empty value)."""
    data = getattr(os.environ, "_data", None)
    if type(data) is not dict:          # not CPython's os._Environ: the public way
        return os.environ.get("EVT_POISON") == "1"
    return data.get(_POISON) == _ON
