"""backends/gpu/streams.py on the CPU, with the driver replaced by a recorder: a kernel's
workspace is ordered across streams by one event (wait only when the stream changes), nothing
cross-stream happens inside a CUDA-graph capture, and the caller's stream is read per side."""
import ctypes

import pytest

from evt_backends.gpu import cuda, streams


class _Driver:
    def __init__(self):
        self.calls, self.capturing = [], set()

    def cuEventCreate(self, ev, flags):
        ctypes.cast(ev, ctypes.POINTER(ctypes.c_void_p))[0] = 0xE0
        self.calls.append(("create",))
        return 0

    def cuEventRecord(self, ev, stream):
        self.calls.append(("record", stream.value or 0))
        return 0

    def cuStreamWaitEvent(self, stream, ev, flags):
        self.calls.append(("wait", stream.value or 0))
        return 0

    def cuStreamIsCapturing(self, stream, status):
        ctypes.cast(status, ctypes.POINTER(ctypes.c_int))[0] = int((stream.value or 0) in self.capturing)
        return 0


@pytest.fixture
def driver(monkeypatch):
    d = _Driver()
    monkeypatch.setattr(cuda, "lib", lambda backend="gpu": d)
    return d


def _call(order, stream):
    order.before(stream)
    order.after(stream)


def test_wait_only_when_the_stream_changes(driver):
    order = streams.WorkspaceOrder()
    for s in (7, 7, 9, 9, 7):
        _call(order, s)
    waits = [c for c in driver.calls if c[0] == "wait"]
    assert waits == [("wait", 9), ("wait", 7)]
    assert [c for c in driver.calls if c[0] == "create"] == [("create",)]      # one event per kernel
    assert sum(c[0] == "record" for c in driver.calls) == 5


def test_nothing_cross_stream_inside_a_capture(driver):
    order = streams.WorkspaceOrder()
    _call(order, 7)
    driver.capturing.add(9)
    driver.calls.clear()
    _call(order, 9)                       # captured: neither a wait on 7's event nor a record
    assert driver.calls == []
    driver.calls.clear()
    _call(order, 7)                       # after the capture the order starts afresh
    assert ("wait", 7) not in driver.calls and ("record", 7) in driver.calls


def test_current_stream_of_numpy_and_numba_arrays_is_the_default_stream():
    assert streams.current_stream("numpy") == 0 and streams.current_stream("numba") == 0


def test_capture_query_asks_torch_for_its_current_stream(monkeypatch):
    """A torch call's stream is torch's current stream, so torch's own query answers for it;
    CuPy's and NumPy's go to the driver query."""
    torch = pytest.importorskip("torch")
    answers = iter([True, False])
    monkeypatch.setattr(torch._C, "_cuda_isCurrentStreamCapturing", lambda: next(answers), raising=False)
    query = streams.capture_query("torch")
    assert query(0x1234) is True and query(0x1234) is False
    assert streams.capture_query("cupy") is streams.capturing
