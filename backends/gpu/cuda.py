"""The CUDA driver API through ctypes: one libcuda handle with a current context (the device's
primary context, shared with numba, CuPy and torch), for every GPU backend."""
import ctypes
import threading

from evt_core.errors import BackendUnavailableError, KernelCompileError

_lib = None
_lock = threading.Lock()


class DriverError(KernelCompileError):
    def __init__(self, call, code, backend="gpu"):
        name = ctypes.c_char_p()
        if _lib is not None:
            _lib.cuGetErrorName(code, ctypes.byref(name))
        super().__init__(backend, call, f"CUDA driver returned {code} ({(name.value or b'?').decode()})")


def lib(backend="gpu"):
    """libcuda with a current context. Raises BackendUnavailableError when there is no driver
    or no device."""
    global _lib
    with _lock:
        if _lib is None:
            try:
                cu = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise BackendUnavailableError(f"{backend}: no CUDA driver (libcuda.so.1): {e}") from None
            if cu.cuInit(0):
                raise BackendUnavailableError(f"{backend}: cuInit failed: no usable CUDA GPU")
            _lib = cu
        _ensure_context(_lib)
        return _lib


def _ensure_context(cu):
    ctx = ctypes.c_void_p()
    cu.cuCtxGetCurrent(ctypes.byref(ctx))
    if ctx.value:
        return
    dev = ctypes.c_int()
    check("cuDeviceGet", cu.cuDeviceGet(ctypes.byref(dev), 0))
    check("cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", cu.cuCtxSetCurrent(ctx))


def check(call, code, backend="gpu"):
    if code:
        raise DriverError(call, code, backend)
