"""User arrays <-> device pointers, without copies where the data is already on the GPU.

Every operand is wrapped in a `DevArray` (pointer, shape, byte strides, NumPy dtype) that
`evt_core.bind` can check like any array. Each call has a *side*, the library its inputs came
from; outputs are allocated on that side, so torch in gives torch out (bf16 included), CuPy in
gives CuPy out, and NumPy in is copied to the device and its results copied back.
"""
import functools
import math

import numpy as np

from evt_core.dtypes import DTYPES, bfloat16
from evt_core.errors import DTypeError, ShapeError

from ...gpu.arrays import array_kind


class DevArray:
    __slots__ = ("ptr", "shape", "strides", "dtype", "owner")

    def __init__(self, ptr, shape, strides, dtype, owner):
        self.ptr, self.shape, self.strides, self.dtype, self.owner = ptr, tuple(shape), tuple(strides), dtype, owner


def _torch_dtype_map(torch):
    return {torch.float32: DTYPES["float32"], torch.float16: DTYPES["float16"], torch.bfloat16: bfloat16}


def side_of(x):
    """'numpy', 'torch', 'cupy' or 'foreign' (CUDA array interface or DLPack)."""
    kind = array_kind(x)
    if kind is None:
        raise ShapeError(f"cannot use an object of type {type(x).__name__} as an array; pass a CuPy, NumPy or "
                         "torch array, or anything with __cuda_array_interface__ or __dlpack__")
    return {"cuda_array": "foreign", "dlpack": "foreign"}.get(kind, kind)


def to_device(x, what):
    """Wrap (or, for NumPy, upload) one array; returns a DevArray."""
    import cupy as cp
    side = side_of(x)
    if side == "torch":
        import torch
        if not x.is_cuda:
            raise ShapeError(f"{what} is a CPU torch tensor; move it to the GPU with .cuda() or pass a NumPy array")
        dt = _torch_dtype_map(torch).get(x.dtype)
        if dt is None:
            raise DTypeError(f"{what} has dtype {x.dtype}; supported dtypes are float32, float16, bfloat16")
        item = x.element_size()
        return DevArray(x.data_ptr(), x.shape, [s * item for s in x.stride()], dt, x)
    if side == "numpy":
        dt = x.dtype
        x = cp.asarray(x.view(np.uint16) if dt == bfloat16 else x)
        return DevArray(x.data.ptr, x.shape, x.strides, dt, x)
    if side == "foreign":
        x = cp.asarray(x) if hasattr(x, "__cuda_array_interface__") else cp.from_dlpack(x)
    return DevArray(x.data.ptr, x.shape, x.strides, _cupy_dtype(x), x)


def _cupy_dtype(x):
    dt = np.dtype(x.dtype)
    return bfloat16 if dt.name == "bfloat16" else dt


class Allocator:
    """alloc/fill callbacks for bind, on one side."""

    def __init__(self, side, device_like):
        # the device only, never the tensor: a repeated call's plan keeps its Allocator, and a
        # reference to the recorded call's A would keep that tensor alive (inside a CUDA-graph
        # tree's memory pool, an allocation no output tracks: cudagraph_trees refuses it)
        self.side, self.device = side, getattr(device_like, "device", None)

    def alloc(self, shape, dtype_name, strides):
        dt = DTYPES[dtype_name]
        size = 1 + sum((e - 1) * s for e, s in zip(shape, strides)) if all(shape) else 1
        byte_strides = [s * dt.itemsize for s in strides]
        if self.side == "torch":
            import torch
            tdt = {v: k for k, v in _torch_dtype_map(torch).items()}[dt]
            t = torch.empty_strided(tuple(shape), tuple(strides), dtype=tdt, device=self.device)
            return DevArray(t.data_ptr(), shape, byte_strides, dt, t)
        import cupy as cp
        base = cp.empty(max(size, 1), np.uint16 if dt == bfloat16 else dt)
        arr = cp.ndarray(tuple(shape), base.dtype, memptr=base.data, strides=tuple(byte_strides))
        return DevArray(base.data.ptr, shape, byte_strides, dt, arr)

    def fill(self, arr, value):
        o = arr.owner
        if self.side == "torch":
            o.fill_(value)
        elif arr.dtype == bfloat16:      # uint16-backed: write the bf16 bit pattern
            o.fill(np.array([value], np.float32).astype(bfloat16).view(np.uint16)[0])
        else:
            o.fill(value)

    def result(self, arr):
        """The user-facing array for an output DevArray."""
        o = arr.owner
        if self.side == "torch":
            return o
        if self.side == "numpy":
            host = o.get()
            return host.view(bfloat16) if arr.dtype == bfloat16 else host
        if arr.dtype == bfloat16:
            try:    # CuPy builds with ml_dtypes support take the bf16 dtype directly
                return o.view(bfloat16)
            except Exception:       # noqa: BLE001 - older CuPy: hand back the raw uint16 bits
                return o
        return o


class OutputMaker:
    """Allocates a recorded call's outputs again (its Allocator.alloc calls, in order) for a
    repeated call, with the per-call work decided once: a torch output is one
    torch.empty_strided (dtype and device fixed by the call's signature), returned as is."""

    def __init__(self, side, like, calls):
        self.side = side
        self._alloc = Allocator(side, like)
        if side == "torch":
            import torch
            tdt = {v: k for k, v in _torch_dtype_map(torch).items()}
            self._new = [functools.partial(torch.empty_strided, tuple(shape), tuple(strides),
                                           dtype=tdt[DTYPES[dt]], device=like.device)
                         for shape, dt, strides in calls]
        else:
            self._new = [functools.partial(self._alloc.alloc, *c) for c in calls]

    def make(self, poison):
        """(device pointers, user-facing arrays) of new outputs, NaN-filled when `poison`."""
        made = [new() for new in self._new]
        if self.side == "torch":
            if poison:
                for t in made:
                    t.fill_(math.nan)
            return [t.data_ptr() for t in made], made
        alloc = self._alloc
        if poison:
            for a in made:
                alloc.fill(a, math.nan)
        return [a.ptr for a in made], [alloc.result(a) for a in made]
