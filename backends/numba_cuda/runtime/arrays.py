"""Where the caller's arrays live, and how results go back to that side.

Sides: "numpy" (host arrays: copied to device mirrors and back, results are NumPy), "cupy",
"torch" and "numba" (device arrays used in place by pointer; results are allocated on the same
side; any other `__cuda_array_interface__` object counts as "numba"). Device arrays are wrapped
in `DevView` (shape, byte strides, NumPy dtype, pointer) so `evt_core.bind` sees one duck type.
"""
import ctypes
import math
from dataclasses import dataclass

import numpy as np

from evt_core.dtypes import DTYPES
from evt_core.errors import DTypeError, UnsupportedError

from ...gpu.arrays import array_kind
from . import driver

_NAN_BITS = {"float32": (32, 0x7FC00000), "float16": (16, 0x7E00), "bfloat16": (16, 0x7FC0)}


@dataclass
class DevView:
    ptr: int
    shape: tuple
    strides: tuple        # bytes, like NumPy
    dtype: np.dtype
    owner: object         # the user-facing array


def side_of(x):
    """'numpy', 'torch', 'cupy', 'numba' (any other CUDA array interface), or None."""
    kind = array_kind(x)
    return {"cuda_array": "numba", "dlpack": None}.get(kind, kind)


_TORCH_NAMES = {}


def _torch_names():
    """torch dtype -> our dtype name, built once (this runs on every call of every kernel)."""
    if not _TORCH_NAMES:
        import torch
        _TORCH_NAMES.update({torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"})
    return _TORCH_NAMES


def view(x, side, what):
    """DevView of a device array (or the NumPy array itself on the numpy side)."""
    if side == "numpy":
        return x
    if side == "torch":
        names = _torch_names()
        if x.dtype not in names:
            raise DTypeError(f"{what} is a torch tensor of dtype {x.dtype}; use float32, float16 or bfloat16")
        if not x.is_cuda:
            raise UnsupportedError(f"{what} is a CPU torch tensor; pass x.cuda() or x.numpy()")
        dt = DTYPES[names[x.dtype]]
        return DevView(x.data_ptr(), tuple(x.shape), tuple(s * dt.itemsize for s in x.stride()), dt, x)
    cai = x.__cuda_array_interface__
    dt = np.dtype(cai["typestr"]) if cai["typestr"] != "<V2" else None
    if getattr(x, "dtype", None) is not None and str(x.dtype) == "bfloat16":
        dt = DTYPES["bfloat16"]
    if dt is None:
        raise DTypeError(f"{what} has typestr {cai['typestr']}; pass float32/float16, or bfloat16 through "
                         "CuPy/torch")
    shape = tuple(cai["shape"])
    strides = cai.get("strides") or _contiguous_strides(shape, dt.itemsize)
    return DevView(cai["data"][0], shape, tuple(strides), dt, x)


def _contiguous_strides(shape, item):
    out, step = [], item
    for e in reversed(shape):
        out.append(step)
        step *= max(e, 1)
    return tuple(reversed(out))


def span(shape, strides_bytes, itemsize, what):
    """Bytes from element 0 to one past the last element. Negative strides are refused (the
    kernel addresses from element 0 upward)."""
    if any(s < 0 for s in strides_bytes):
        raise UnsupportedError(f"{what} has negative strides {tuple(strides_bytes)}; pass a copy "
                               "(np.ascontiguousarray / x.copy())")
    if not all(shape):
        return 0
    return sum((e - 1) * s for e, s in zip(shape, strides_bytes)) + itemsize


def allocator(side, like):
    """alloc(shape, dtype_name, element_strides) for bind, on `side` (device of `like`)."""
    def alloc(shape, dtype, strides):
        dt = DTYPES[dtype]
        nbytes = (1 + sum((e - 1) * s for e, s in zip(shape, strides))) * dt.itemsize if all(shape) else dt.itemsize
        bstr = tuple(s * dt.itemsize for s in strides)
        if side == "numpy":
            base = np.empty(nbytes // dt.itemsize, dt)
            return np.lib.stride_tricks.as_strided(base, shape, bstr, writeable=True)
        if side == "cupy":
            import cupy
            mem = cupy.cuda.alloc(nbytes)
            arr = cupy.ndarray(shape, dt if dtype != "bfloat16" else np.uint16, memptr=mem, strides=bstr)
            return view(arr, side, "output") if dtype != "bfloat16" else DevView(mem.ptr, shape, bstr, dt, arr)
        if side == "torch":
            import torch
            tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
            t = torch.empty_strided(shape, strides, dtype=tdt, device=like.owner.device)
            return view(t, side, "output")
        from numba import cuda
        if dtype == "bfloat16":
            raise DTypeError("bfloat16 outputs on numba device arrays are not supported (numba has no bf16 "
                             "array dtype); pass CuPy or torch arrays")
        arr = cuda.device_array(shape, dt, strides=bstr)
        return view(arr, "numba", "output")
    return alloc


def fill(x, value):
    """Poisoning for EVT_POISON=1 (bind calls it with NaN)."""
    if isinstance(x, np.ndarray):
        x[...] = value
        return
    bits, word = _NAN_BITS[_name(x.dtype)]
    if not math.isnan(value):
        raise ValueError("fill supports only NaN poisoning")
    n = span(x.shape, x.strides, x.dtype.itemsize, "output") // x.dtype.itemsize
    (driver.memset32 if bits == 32 else driver.memset16)(x.ptr, word, n)


def _name(dt):
    for k, v in DTYPES.items():
        if v == dt:
            return k
    raise DTypeError(f"unsupported dtype {dt}")


def host_bytes(x):
    """A writable uint8 array over the span of NumPy array `x` (shares its memory)."""
    n = span(x.shape, x.strides, x.itemsize, "array")
    if n == 0:
        return np.empty(0, np.uint8)
    return np.ctypeslib.as_array((ctypes.c_uint8 * n).from_address(x.ctypes.data))


def result_object(x, side):
    """What the caller gets back for an output."""
    if side == "numpy":
        return x
    if side == "cupy" and x.dtype == DTYPES["bfloat16"]:
        return x.owner.view(DTYPES["bfloat16"]) if _cupy_bf16_ok() else x.owner
    return x.owner


def _cupy_bf16_ok():
    try:
        import cupy
        cupy.empty(1, np.uint16).view(DTYPES["bfloat16"])
        return True
    except Exception:
        return False
