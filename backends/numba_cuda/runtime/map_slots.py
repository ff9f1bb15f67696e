"""Device memory for the sm_90a kernel's tensor maps, written on the caller's stream, so that
calls work unchanged inside a CUDA-graph capture.

numba's ABI passes no 128-byte by-value parameter, so the kernel reads its A and B maps from
global memory. A map embeds its tensor's address, so new addresses need new maps on the device.
A synchronous allocation or copy is refused during stream capture; an asynchronous copy from
pinned host memory on the capturing stream is not: it becomes a node of the graph. So the maps
live in slots of one device slab with a pinned host twin, allocated outside any capture, and a
slot is filled by `cuMemcpyHtoDAsync(slot, host twin)` on the call's stream, ahead of the
kernel on that stream.

Invariants:
- a slot's host twin is written only while no queued or captured copy reads it: a fresh slot,
  or a recycled one after `cuCtxSynchronize` (eager slots only);
- a slot filled by an eager copy serves later calls with the same addresses; a slot used or
  filled inside a capture is the graph's for good (a replay may come at any time), so it is
  never recycled, and a slot filled inside a capture serves only that call (the copy runs when
  the graph replays, not before).
"""
import ctypes

from . import driver

MAP = 128                        # bytes of one tensor map
SLOTS = 1024                     # per slab; a new slab when one fills outside capture


class MapSlots:
    """Slots of `maps` tensor maps each: A and B, then (fragment epilogue) one per output."""

    def __init__(self, maps=2):
        self.maps, self.slot = maps, MAP * maps
        self._slabs = []          # (DeviceBuffer, pinned host address)
        self._free = []           # eager-recyclable slot device addresses
        self._host = {}           # slot device address -> its pinned host twin's address
        self._eager = {}          # call key -> slot filled by an eager copy
        self._graph = set()       # slots a captured graph refers to: never recycled
        self.recycles = 0         # times eager slots were taken back (see the invariants)

    def pointers(self, key, encode, stream, capturing):
        """The device addresses of the call's maps (A, B, ...) for the call `key` (addresses and
        problem), with `encode()` giving the maps' bytes on a miss; None when capturing and no
        slot is free (the caller then takes the mma.sync kernel)."""
        slot = self._eager.get(key)
        if slot is not None:
            if capturing:
                self._graph.add(slot)
            return self._addresses(slot)
        if not self._free and not capturing:
            self._recycle_or_grow()
        if not self._free:
            return None
        slot = self._free.pop()
        raw = encode()
        assert len(raw) == self.slot, (len(raw), self.slot)
        ctypes.memmove(self._host[slot], raw, self.slot)
        driver._check("cuMemcpyHtoDAsync", driver.lib().cuMemcpyHtoDAsync_v2(
            ctypes.c_uint64(slot), ctypes.c_void_p(self._host[slot]), ctypes.c_size_t(self.slot),
            ctypes.c_void_p(stream)))
        if capturing:
            self._graph.add(slot)
        else:
            self._eager[key] = slot
        return self._addresses(slot)

    def _addresses(self, slot):
        return tuple(range(slot, slot + self.slot, MAP))

    def _recycle_or_grow(self):
        """Outside capture, with no free slot: take back the eager slots no graph refers to once
        the device is idle (nothing queued reads them), or add a slab if every slot is a graph's."""
        driver._check("cuCtxSynchronize", driver.lib().cuCtxSynchronize())
        self.recycles += 1
        for key, slot in list(self._eager.items()):
            if slot not in self._graph:
                del self._eager[key]
                self._free.append(slot)
        if not self._free:
            self._grow()

    def _grow(self):
        cu = driver.lib()
        dev = driver.DeviceBuffer(self.slot * SLOTS)
        host = ctypes.c_void_p()
        driver._check("cuMemHostAlloc", cu.cuMemHostAlloc(ctypes.byref(host), ctypes.c_size_t(self.slot * SLOTS),
                                                          ctypes.c_uint(0)))
        self._slabs.append((dev, host.value))
        for i in range(SLOTS):
            self._host[dev.ptr + i * self.slot] = host.value + i * self.slot
        self._free += [dev.ptr + i * self.slot for i in reversed(range(SLOTS))]
