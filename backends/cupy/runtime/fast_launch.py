"""The cached launch path: one ctypes `cuLaunchKernel` per kernel with a prebuilt `void**`.

CuPy's RawKernel call converts every argument on every launch; for a call whose EpiArgs blob
and tensor maps are already decided (same kernel, shapes and pointers) that work is pure host
overhead. `build` turns a launch plan that CuPy has just run successfully (so the module is
loaded and the shared-memory attribute set) into (CUfunction, grid, block, smem, params) with
the parameter bytes copied into buffers this module owns; `launch` only calls the driver.
The driver copies the parameter values at launch time, so the buffers are reusable at once.
Set EVT_CUPY_FAST_LAUNCH=0 to launch through CuPy every time.
"""
import ctypes
import os

import numpy as np

_fn = None
_cp = None


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


def current_stream():
    global _cp
    if _cp is None:
        import cupy
        _cp = cupy
    return _cp.cuda.get_current_stream().ptr


class _Launch:
    __slots__ = ("func", "grid", "block", "smem", "params", "keep")


def build(plan):
    """plan: [(RawKernel, grid, block, smem, (numpy param arrays...))] -> [_Launch] or None."""
    out = []
    try:
        for fn, grid, block, smem, params in plan:
            keep = tuple(np.array(p, copy=True) for p in params)     # owned, contiguous copies
            L = _Launch()
            L.func = int(fn.kernel.ptr)
            L.grid, L.block, L.smem = int(grid), int(block), int(smem)
            L.params = (ctypes.c_void_p * len(keep))(*[p.ctypes.data for p in keep])
            L.keep = keep
            out.append(L)
    except Exception:  # noqa: BLE001 - an older CuPy without .kernel.ptr: stay on the CuPy path
        return None
    return out


def launch(L, stream):
    r = _fn(L.func, L.grid, 1, 1, L.block, 1, 1, L.smem, stream, L.params, None)
    if r != 0:
        from evt_core.errors import KernelCompileError
        raise KernelCompileError("cupy", "cuLaunchKernel", f"CUresult {r} (grid {L.grid}, block {L.block}, "
                                 f"shared {L.smem} B)")
