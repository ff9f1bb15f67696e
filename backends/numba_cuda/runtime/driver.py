"""The thin launch path: the CUDA driver API through ctypes.

numba's dispatcher costs 30-77 us per launch (argument typing, array flattening); our kernels
take only scalars, so a launch here is one cuLaunchKernel with a prebuilt array of parameter
slots. Modules are loaded from the cubins `build.py` produced (cached on disk), so a warm process
never imports numba at all for numpy/CuPy/torch inputs.
"""
import contextlib
import ctypes
import threading

from ...gpu import cuda

MAX_DYNAMIC_SHARED = 8      # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES


class DriverError(cuda.DriverError):
    def __init__(self, call, code):
        super().__init__(call, code, "numba_cuda")


def lib():
    return cuda.lib("numba_cuda")


def _check(call, code):
    if code:
        raise DriverError(call, code)


def compute_capability():
    cu, dev = lib(), ctypes.c_int()
    _check("cuCtxGetDevice", cu.cuCtxGetDevice(ctypes.byref(dev)))
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(ctypes.byref(major), 75, dev))
    _check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev))
    return major.value, minor.value


class Function:
    """A loaded kernel. `launch` takes the parameter values in signature order."""

    def __init__(self, image, entry, kinds, dynamic_shared=0):
        cu = lib()
        self._module, self._fn = ctypes.c_void_p(), ctypes.c_void_p()
        buf = ctypes.create_string_buffer(image) if isinstance(image, bytes) else image
        _check("cuModuleLoadData", cu.cuModuleLoadData(ctypes.byref(self._module), buf))
        _check("cuModuleGetFunction", cu.cuModuleGetFunction(ctypes.byref(self._fn), self._module, entry.encode()))
        if dynamic_shared > 48 * 1024:
            _check("cuFuncSetAttribute", cu.cuFuncSetAttribute(self._fn, MAX_DYNAMIC_SHARED, dynamic_shared))
        # One preallocated slot per parameter and the pointer array over them: a launch only
        # assigns values (not thread-safe: one launch at a time per Function, like the stream).
        # Invariant: _owner is the FastCall whose values the slots hold (None: the checked path's).
        self._slots = [ctypes.c_float() if k == "f32" else ctypes.c_int64() for k in kinds]
        self._ptrs = (ctypes.c_void_p * max(len(kinds), 1))(*[ctypes.addressof(s) for s in self._slots])
        self._launch = cu.cuLaunchKernel
        self._owner = None
        self._stream = self._stream_arg = None       # the last stream and its c_void_p
        self.dynamic_shared = dynamic_shared

    def launch(self, grid, block, values, stream=None):
        """The checked path's launch: every slot written."""
        stream = current_stream() if stream is None else stream
        for slot, v in zip(self._slots, values):
            slot.value = v
        self._owner = None
        self._go(self.head(grid, block), stream)

    def head(self, grid, block):
        """cuLaunchKernel's leading arguments for `grid` and `block`, for `replay`."""
        return (self._fn, *grid, *block, self.dynamic_shared)

    def replay(self, head, base, changed, new, stream, owner):
        """A repeated call's launch (fastcall.FastCall `owner`): the parameter values are `base`
        (its recorded call's) except `new` at positions `changed`. While `owner` was the last to
        fill the slots, only `changed` is written (no other caller has written them since)."""
        slots = self._slots
        if owner is not self._owner:
            for slot, v in zip(slots, base):
                slot.value = v
            self._owner = owner
        for i, v in zip(changed, new):
            slots[i].value = v
        self._go(head, stream)

    def _go(self, head, stream):
        if stream != self._stream:
            self._stream, self._stream_arg = stream, ctypes.c_void_p(stream)
        code = self._launch(*head, self._stream_arg, self._ptrs, None)
        if code == _INVALID_CONTEXT:      # a thread with no current context: make it current, once more
            lib()
            code = self._launch(*head, self._stream_arg, self._ptrs, None)
        if code:
            raise DriverError("cuLaunchKernel", code)


_INVALID_CONTEXT = 201          # CUDA_ERROR_INVALID_CONTEXT
_STREAM = threading.local()


def current_stream() -> int:
    """The CUstream launches and memsets go to: 0 (the legacy default stream) unless a caller
    (the torch custom op) set its own with `on_stream`."""
    return getattr(_STREAM, "ptr", 0)


@contextlib.contextmanager
def on_stream(ptr):
    """Launch on CUstream `ptr` inside the block (e.g. torch's current stream, so kernels order
    with the caller's work and can be captured in a CUDA graph)."""
    old = current_stream()
    _STREAM.ptr = int(ptr)
    try:
        yield
    finally:
        _STREAM.ptr = old


def memset32(ptr, word, count, stream=None):
    stream = current_stream() if stream is None else stream
    _check("cuMemsetD32Async", lib().cuMemsetD32Async(ctypes.c_uint64(ptr), ctypes.c_uint32(word),
                                                        ctypes.c_size_t(count), ctypes.c_void_p(stream)))


def memset16(ptr, half, count, stream=None):
    stream = current_stream() if stream is None else stream
    _check("cuMemsetD16Async", lib().cuMemsetD16Async(ctypes.c_uint64(ptr), ctypes.c_uint16(half),
                                                        ctypes.c_size_t(count), ctypes.c_void_p(stream)))


class DeviceBuffer:
    """Raw device memory for numpy-side mirrors and reduction workspaces."""

    def __init__(self, nbytes):
        self.nbytes = max(int(nbytes), 16)
        p = ctypes.c_uint64()
        _check("cuMemAlloc", lib().cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(self.nbytes)))
        self.ptr = p.value

    def upload(self, host):
        _check("cuMemcpyHtoD", lib().cuMemcpyHtoD_v2(ctypes.c_uint64(self.ptr), host.ctypes.data_as(ctypes.c_void_p),
                                                      ctypes.c_size_t(host.nbytes)))

    def download(self, host):
        _check("cuMemcpyDtoH", lib().cuMemcpyDtoH_v2(host.ctypes.data_as(ctypes.c_void_p), ctypes.c_uint64(self.ptr),
                                                      ctypes.c_size_t(host.nbytes)))

    def __del__(self, _u64=ctypes.c_uint64):
        # at interpreter exit module globals (ctypes' names among them) may already be None:
        # the ctypes type is bound at definition time, the library looked up defensively
        cu = getattr(cuda, "_lib", None) if cuda is not None else None
        if cu is not None and getattr(self, "ptr", 0):
            cu.cuMemFree_v2(_u64(self.ptr))
            self.ptr = 0
