"""The cupy backend's repeated call on a machine without a GPU: `python3 -m bench.host_profile
--cpu-stub`. The backend's own code runs unchanged; only what needs a device is stood in for:

* CuPy: a module of fakes (device queries, NVRTC modules whose functions only record a launch,
  streams, events, device buffers); tuning then times every candidate alike and keeps the first.
* torch CUDA tensors: `FakeTensor` (what evt reads of a tensor, as plain attributes), and
  `torch.empty_strided` answering for device tensors with a `FakeTensor` whose block returns to
  a free list when it dies, as torch's caching allocator hands a freed block back.
* libcuda: for the launch and tensor-map encoding, libc's strlen with the driver functions'
  argument types, so every call pays the same ctypes conversion of its arguments as the real one
  and returns 0 (its first argument always points at a zero byte: a zeroed tensor-map buffer, or
  the fake functions' handle); every other entry point (events, capture queries) succeeds.

What the numbers leave out: torch's own attribute and allocation calls (C, ~1-3 us per call on
a GPU host), the stream query (~0.2 us), and the driver's launch itself."""
import contextlib
import ctypes
import os
import sys
import tempfile
import types

import numpy as np

_ZERO = ctypes.create_string_buffer(8)          # the fake CUfunction handle: points at a zero byte
_STRLEN = ctypes.CDLL(None).strlen


def _driver_stand_in(argtypes):
    return ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(ctypes.cast(_STRLEN, ctypes.c_void_p).value)


class FakeTensor:
    """A CUDA torch tensor as evt reads it (fast_signature, to_device, outputs)."""
    __module__ = "torch.cpu_stub"
    is_cuda = True

    def __init__(self, shape, strides, dtype, device, ptr, pool=None):
        import torch
        self.shape, self._strides, self.dtype, self.device = torch.Size(shape), tuple(strides), dtype, device
        self._ptr, self._pool = ptr, pool

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return self.dtype.itemsize

    def fill_(self, value):
        return self

    def __del__(self):
        if self._pool is not None:
            self._pool.append(self._ptr)


class _Allocator:
    """torch.empty_strided for device tensors: freed blocks are handed back, newest first."""

    def __init__(self, real):
        self.real, self.free, self.next = real, {}, 1 << 32

    def __call__(self, size, stride, *, dtype=None, device=None, **kw):
        if getattr(device, "type", None) != "cuda":
            return self.real(size, stride, dtype=dtype, device=device, **kw)
        pool = self.free.setdefault((tuple(size), tuple(stride), dtype), [])
        if pool:
            ptr = pool.pop()
        else:
            ptr, self.next = self.next, self.next + (1 << 24)
        return FakeTensor(size, stride, dtype, device, ptr, pool)


_next_input = [1 << 20]


class _Driver:
    """backends/gpu/cuda's libcuda handle: every call succeeds and writes nothing."""

    def __getattr__(self, name):
        return lambda *args: 0


def tensor(shape, dtype):
    """A row-major fake CUDA tensor at a fresh 1 MB-aligned address."""
    import torch
    strides = [int(np.prod(shape[i + 1:])) for i in range(len(shape))]
    _next_input[0] += 1 << 20
    return FakeTensor(shape, strides, dtype, torch.device("cuda", 0), _next_input[0])


def compile_cupy(tree, **options):
    """The cupy backend's kernel for `tree`, past evt_core.compile's cache (a stubbed kernel must
    not outlive the stub)."""
    from evt_backends.cupy.backend import CupyBackend
    return CupyBackend().compile(tree, options)


def _fake_cupy():
    """A module object with the parts of CuPy the cupy backend touches."""
    cp = types.ModuleType("cupy")
    launches = []

    class Buffer:
        def __init__(self, n, dtype=np.float32):
            self.size, self.dtype = int(n), np.dtype(dtype)
            self.data = types.SimpleNamespace(ptr=(1 << 40) + id(self) % (1 << 30) * 256)

        def fill(self, value):
            pass

    class Function:
        kernel = types.SimpleNamespace(ptr=ctypes.addressof(_ZERO))
        max_dynamic_shared_size_bytes = 0

        def __init__(self, name):
            self.name = name

        def __call__(self, grid, block, params, shared_mem=0, stream=None):
            launches.append(self.name)

    class RawModule:
        def __init__(self, code, options=()):
            self.code = code

        def get_function(self, name):
            return Function(name)

    class Event:
        def record(self, stream=None):
            pass

        def synchronize(self):
            pass

    stream = types.SimpleNamespace(ptr=0)
    device = types.SimpleNamespace(id=0, compute_capability="90", attributes={"MultiProcessorCount": 132})
    cp.cuda = types.SimpleNamespace(
        runtime=types.SimpleNamespace(getDevice=lambda: 0, getDeviceCount=lambda: 1,
                                      getDeviceProperties=lambda i: {"name": b"cpu stub (sm_90)"}),
        Device=lambda *a: device, Event=Event, get_elapsed_time=lambda a, b: 1.0,
        ExternalStream=lambda ptr: stream, Stream=types.SimpleNamespace(null=stream),
        get_current_stream=lambda: stream)
    cp.RawModule, cp.launches = RawModule, launches
    cp.empty = lambda n, dtype=np.float32: Buffer(n, dtype)
    cp.zeros = cp.empty
    return cp


@contextlib.contextmanager
def stubbed():
    """Inside: the cupy backend compiles and runs on this CPU (see the module docstring)."""
    import torch

    from evt_backends.cupy import runner
    from evt_backends.cupy.runtime import fast_launch
    from evt_backends.gpu import cuda, streams, tensormap
    saved = (sys.modules.get("cupy"), torch.empty_strided, fast_launch._fn, tensormap._lib,
             list(streams._torch_current), dict(tensormap._cache), list(runner._get_device), cuda._lib)
    cache_dir = tempfile.TemporaryDirectory()        # tuning runs, and leaves no winner behind
    with _env("EVT_CACHE_DIR", cache_dir.name):
        try:
            sys.modules["cupy"] = _fake_cupy()
            torch.empty_strided = _Allocator(torch.empty_strided)
            fast_launch._fn = _driver_stand_in([ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3)
            tensormap._lib = _driver_stand_in(
                [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p] + [ctypes.c_void_p] * 4
                + [ctypes.c_int] * 4)
            streams._torch_current[:] = [lambda: 0]
            runner._get_device.clear()
            cuda._lib = _Driver()
            yield sys.modules["cupy"]
        finally:
            if saved[0] is None:
                sys.modules.pop("cupy", None)
            else:
                sys.modules["cupy"] = saved[0]
            torch.empty_strided, fast_launch._fn, tensormap._lib = saved[1:4]
            streams._torch_current[:] = saved[4]
            runner._get_device[:] = saved[6]
            cuda._lib = saved[7]
            tensormap._cache.clear()
            tensormap._cache.update(saved[5])
            cache_dir.cleanup()


@contextlib.contextmanager
def _env(name, value):
    old = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = old
