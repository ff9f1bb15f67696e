"""The sm_90a kernel's tensor-map slots (runtime/map_slots.py), with the driver replaced by a
recorder: eager calls reuse a slot per address pair, captured calls never take an eager slot
that is still to be written and never give theirs back, and recycling waits for an idle device."""
import ctypes

import pytest

from evt_backends.numba_cuda.runtime import driver, map_slots


@pytest.fixture
def fake(monkeypatch):
    calls = []
    hosts = []

    class Lib:
        def cuMemcpyHtoDAsync_v2(self, dst, src, n, stream):
            calls.append(("copy", dst.value, ctypes.string_at(src.value, 256), stream.value))
            return 0

        def cuCtxSynchronize(self):
            calls.append(("sync",))
            return 0

        def cuMemHostAlloc(self, out, n, flags):
            buf = ctypes.create_string_buffer(n.value)
            hosts.append(buf)
            ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = ctypes.addressof(buf)
            return 0

    class Buffer:
        base = [0x1000000]

        def __init__(self, nbytes):
            self.ptr = Buffer.base[0]
            Buffer.base[0] += 1 << 20
    monkeypatch.setattr(driver, "lib", lambda: Lib())
    monkeypatch.setattr(driver, "DeviceBuffer", Buffer)
    monkeypatch.setattr(map_slots, "SLOTS", 3)
    return calls


def _maps(tag):
    return lambda: bytes([tag]) * 256


def test_eager_calls_share_a_slot_per_address_pair(fake):
    s = map_slots.MapSlots()
    a = s.pointers("k1", _maps(1), stream=7, capturing=False)
    assert s.pointers("k1", _maps(9), stream=7, capturing=False) == a      # a hit: no second copy
    copies = [c for c in fake if c[0] == "copy"]
    assert len(copies) == 1 and copies[0][1] == a[0] and copies[0][2] == bytes([1]) * 256 and copies[0][3] == 7
    assert a[1] == a[0] + 128


def test_a_captured_miss_gets_its_own_slot_and_keeps_it(fake):
    s = map_slots.MapSlots()
    eager = s.pointers("k1", _maps(1), 0, capturing=False)
    captured = s.pointers("k2", _maps(2), 5, capturing=True)     # copied on the capturing stream
    assert captured != eager and fake[-1][:2] == ("copy", captured[0]) and fake[-1][3] == 5
    # the captured copy runs only when the graph replays: an eager call must not rely on it
    later = s.pointers("k2", _maps(2), 0, capturing=False)
    assert later != captured
    # k1's eager slot is now a graph's too; the next miss finds no free slot: recycling
    # synchronises and takes back only the eager slot no graph uses (k2's)
    assert s.pointers("k1", _maps(1), 0, capturing=True) == eager
    third = s.pointers("k3", _maps(3), 0, capturing=False)
    assert ("sync",) in fake[1:] and third == later
    assert {captured[0], eager[0]} <= s._graph and not {captured[0], eager[0]} & set(s._free)


def test_capture_with_no_free_slot_says_so(fake):
    s = map_slots.MapSlots()
    assert s.pointers("k1", _maps(1), 0, capturing=True) is None        # no slab yet: none allocated in capture
    s.pointers("k1", _maps(1), 0, capturing=False)
    s.pointers("k2", _maps(2), 0, capturing=True)
    s.pointers("k3", _maps(3), 0, capturing=True)
    assert s.pointers("k4", _maps(4), 0, capturing=True) is None        # every slot taken, no sync in capture
    assert ("sync",) in fake[:1]                                          # only the first (eager) slab needed one
