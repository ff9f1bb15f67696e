"""The three storage dtypes and their rounding. Compute is always float32; a store rounds its
fp32 value to the output dtype with round-to-nearest-even (NumPy's astype for float16,
ml_dtypes' for bfloat16)."""
import math
import struct

import ml_dtypes
import numpy as np

from .errors import DTypeError

bfloat16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16), "bfloat16": bfloat16}


def dtype_name(dtype, what):
    """Canonical name ('float32' | 'float16' | 'bfloat16') of a NumPy-like dtype, or DTypeError
    naming `what`."""
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype
    try:
        d = np.dtype(dtype)
    except TypeError:
        d = None
    if d is None and str(dtype) in ("bfloat16", "torch.bfloat16"):
        return "bfloat16"
    for name, ref in DTYPES.items():
        if d == ref:
            return name
    if d is not None and d.byteorder not in ("=", "|") and d.newbyteorder("=") in DTYPES.values():
        native = d.newbyteorder("=")
        order = "big" if d.byteorder == ">" else "little"
        raise DTypeError(f"{what} is {native.name} stored {order}-endian (dtype {d.str!r}); kernels read "
                         f"native byte order: pass x.astype({native.newbyteorder('<').str!r})")
    hint = ""
    if d is not None and d.kind in "fiub":
        hint = "; cast it, e.g. x.astype(np.float32)"
    elif d is not None and d.kind == "c":
        hint = "; complex values are not supported (pass the real part, x.real.astype(np.float32))"
    raise DTypeError(f"{what} has dtype {dtype}; supported dtypes are float32, float16, bfloat16{hint}")


def round_to(x, name):
    """fp32 array -> array of dtype `name`, rounded to nearest even; beyond the type's range
    that is inf, IEEE's rounding, which the GPU kernels' conversions give too (so no warning)."""
    with np.errstate(over="ignore"):
        return np.asarray(x, np.float32).astype(DTYPES[name])


def float_bits(x: float) -> bytes:
    """A float as its exact float64 bits, for comparing and hashing constants: == and hash()
    identify 0.0 with -0.0 (1/x tells them apart, so merging them is a wrong result) and never
    equate a NaN with itself (the same NaN constant is one value, as CSE wants). Raises
    OverflowError for an int beyond float range."""
    return struct.pack("<d", float(x))


def is_finite(x) -> bool:
    """Whether the real number x is finite, judged on x itself: a NumPy long double beyond
    float64's range is finite though float() of it is inf. float() of an int or Fraction beyond
    float64's range raises OverflowError, which the caller handles."""
    return bool(np.isfinite(x)) if isinstance(x, np.floating) else math.isfinite(float(x))
