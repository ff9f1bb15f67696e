"""The cached launch path: one ctypes `cuLaunchKernel` per kernel with a prebuilt `void**`.

CuPy's RawKernel call converts every argument on every launch; for a call whose EpiArgs blob
and tensor maps are already decided (same kernel, shapes and input pointers) that work is pure
host overhead. `build` turns a launch plan that CuPy has just run successfully (so the module is
loaded and the shared-memory attribute set) into (CUfunction, grid, block, smem, params) with
the parameter bytes copied into buffers this module owns; `launch` only calls the driver.
The driver copies the parameter values at launch time, so the buffers are reusable at once
(launcher.Prepared rewrites their output pointers in place between launches).
Set EVT_CUPY_FAST_LAUNCH=0 to launch through CuPy every time.
"""
import ctypes
import os

import numpy as np

_fn = None


def enabled():
    return os.environ.get("EVT_CUPY_FAST_LAUNCH", "1") != "0" and _driver() is not None


def _driver():
    global _fn
    if _fn is None:
        try:
            lib = ctypes.CDLL("libcuda.so.1")
            f = lib.cuLaunchKernel
        except (OSError, AttributeError):
            _fn = False
            return None
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                      ctypes.c_uint, ctypes.c_uint, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
        _fn = f
    return _fn or None


class _Launch:
    # head: (function, grid x, y, z, block x, y, z, shared bytes) as ctypes values, converted
    # once: ctypes converts a Python int argument into a new ctypes value on every call
    __slots__ = ("head", "params", "keep")


def build(plan):
    """plan: [(RawKernel, grid, block, smem, (numpy param arrays...))] -> [_Launch] or None."""
    out = []
    try:
        for fn, grid, block, smem, params in plan:
            keep = tuple(np.array(p, copy=True) for p in params)     # owned, contiguous copies
            L = _Launch()
            L.head = (ctypes.c_void_p(int(fn.kernel.ptr)),
                      *(ctypes.c_uint(int(v)) for v in (grid, 1, 1, block, 1, 1, smem)))
            L.params = (ctypes.c_void_p * len(keep))(*[p.ctypes.data for p in keep])
            L.keep = keep
            out.append(L)
    except Exception:  # noqa: BLE001 - an older CuPy without .kernel.ptr: stay on the CuPy path
        return None
    return out


def launch(L, stream):
    r = _fn(*L.head, stream, L.params, None)
    if r != 0:
        from evt_core.errors import KernelCompileError
        h = L.head
        raise KernelCompileError("cupy", "cuLaunchKernel", f"CUresult {r} (grid {h[1].value}, block {h[4].value}, "
                                 f"shared {h[7].value} B)")
