"""Kernels run on the caller's current stream, and calls of one kernel on several streams or
threads stay correct.

A compiled kernel keeps one device workspace for its reductions (and the numba backend one
set of launch-parameter slots), reused by every call. Calls on one stream are ordered by the
stream; calls on two streams are not, so `WorkspaceOrder` makes a call on a stream other than
the previous call's wait (on the GPU, not the host) for the event recorded after that call.
The per-kernel lock (held by the caller around bind, launch and `after`) makes the host side
one call at a time, so the event and the slots are never written by two threads at once.
"""
import ctypes
import threading

from . import cuda

_EVENT_DISABLE_TIMING = 0x2
_torch_current = []


def _torch_stream():
    """A function returning torch's current CUDA stream handle on the current device. torch's
    raw-stream query (what its compiled graphs call) costs ~0.2 us where
    torch.cuda.current_stream() builds a Stream object for ~4 us, on every kernel call."""
    if not _torch_current:
        import torch
        raw, device = getattr(torch._C, "_cuda_getCurrentRawStream", None), getattr(torch._C, "_cuda_getDevice", None)
        _torch_current.append((lambda: raw(device())) if raw and device else
                              (lambda: torch.cuda.current_stream().cuda_stream))
    return _torch_current[0]


def current_stream(side):
    """The handle of the caller's current stream for arrays of `side` ('torch', 'cupy'; 0, the
    legacy default stream, for NumPy and numba arrays)."""
    return stream_getter(side)()


def stream_getter(side):
    """The function of no arguments current_stream(side) calls: a repeated call keeps it and
    pays only for the query itself."""
    if side == "torch":
        return _torch_stream()
    return _cupy_stream if side == "cupy" else int      # int() == 0: the legacy default stream


def capture_query(side):
    """A function of the stream handle stream_getter(side)'s function returned, True while that
    stream is being captured. For torch that handle is torch's current stream, so torch's own
    query of its current stream answers for it (a C++ call, where `capturing`'s ctypes driver
    call with its argument objects costs several times more on every repeated call)."""
    if side == "torch":
        import torch
        query = getattr(torch._C, "_cuda_isCurrentStreamCapturing", None)
        if query is not None:
            return lambda stream: query()
    return capturing


def _cupy_stream():
    import cupy
    return cupy.cuda.get_current_stream().ptr


class WorkspaceOrder:
    """Orders the calls that share one workspace across streams (see the module docstring)."""

    def __init__(self):
        self.lock = threading.Lock()
        self._event = None
        self._stream = None

    def before(self, stream):
        if self._stream is not None and self._stream != stream and not capturing(stream):
            cuda.check("cuStreamWaitEvent", cuda.lib().cuStreamWaitEvent(
                ctypes.c_void_p(stream), self._event, ctypes.c_uint(0)))

    def after(self, stream):
        cu = cuda.lib()
        if capturing(stream):
            # Inside a CUDA-graph capture an outside event can be neither waited on nor
            # recorded for later eager waits (capture isolation): the graph's replays are
            # ordered by the stream they replay on, and the next eager call starts afresh.
            self._stream = None
            return
        if self._event is None:
            ev = ctypes.c_void_p()
            cuda.check("cuEventCreate", cu.cuEventCreate(ctypes.byref(ev), ctypes.c_uint(_EVENT_DISABLE_TIMING)))
            self._event = ev
        cuda.check("cuEventRecord", cu.cuEventRecord(self._event, ctypes.c_void_p(stream)))
        self._stream = stream


def capturing(stream):
    """True while `stream` is being captured into a CUDA graph. Asked on every repeated call
    (the state can change between two calls on one stream, so it is never cached): once libcuda
    is loaded the query skips cuda.lib()'s lock and context check, and a failure (e.g. no
    current context in this thread) asks again the checked way."""
    status = ctypes.c_int(0)
    cu = cuda._lib
    if cu is None or cu.cuStreamIsCapturing(ctypes.c_void_p(stream), ctypes.byref(status)):
        cuda.check("cuStreamIsCapturing", cuda.lib().cuStreamIsCapturing(ctypes.c_void_p(stream),
                                                                          ctypes.byref(status)))
    return status.value != 0
