"""Host side of the sm_90a kernel: its tensor maps, grid, dynamic shared memory and watchdog.
Whether a call fits it at all is select.py's question (sm90_refusal).

Tensor maps live in global memory (numba's ABI passes no 128-byte by-value parameter): the two
maps of a call are encoded on the host (backends/gpu/tensormap.py, cached by pointer and
shape) and uploaded once per distinct pair into a device buffer that is never rewritten, so a
kernel still in flight never sees a map change under it.
"""
import ctypes

from evt_core.dtypes import DTYPES

from evt_core.errors import EvtError

from ...gpu import sm90, splitk, tensormap
from . import driver
from .map_slots import MapSlots
from ..codegen.mainloop_sm90 import WAIT_EMPTY, WAIT_FULL, smem_layout
from ..codegen.epilogue_sm90 import staged_rows, tile_inputs

_MULTIPROCESSOR_COUNT = 16        # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
_HOSTALLOC_PORTABLE_DEVICEMAP = 0x03
_slots = {}                       # maps per call -> MapSlots
_watchdog = None


class WatchdogError(EvtError, RuntimeError):
    """A bounded mbarrier wait of the sm_90a kernel timed out (a pipeline bug, never a slow
    GPU); the kernel trapped, so the CUDA context is lost."""


def problem(b):
    """What the maps depend on besides the two addresses: (L, M, N, K, A strides, B strides,
    dtype). Plain values, so a replayed call can keep it without holding b's arrays."""
    return (b.L, b.M, b.N, b.K, tuple(b.a_strides), tuple(b.b_strides), b.dtype)


def encode_maps(b, a_ptr, b_ptr, kmajor, bn):
    """The 256 bytes of the A and B maps for tiles bn wide."""
    return _encode(problem(b), a_ptr, b_ptr, kmajor, bn)


def _encode(prob, a_ptr, b_ptr, kmajor, bn):
    L, M, N, K, a_strides, b_strides, dtype = prob
    amap, bmap = sm90.operand_maps(L, M, N, K, a_strides, b_strides, kmajor, bn,
                                   a_kmajor=sm90.a_kmajor(a_strides))   # select's rule, from the same strides
    return (tensormap.encode(a_ptr, dtype, *amap, backend="numba_cuda")
            + tensormap.encode(b_ptr, dtype, *bmap, backend="numba_cuda"))


def tile_count(n, t):
    return -(-n // t)


def grid(b, pingpong, bn, splits=1):
    """(launch grid, block, the reduction partial grid (n blocks, m blocks, L)) for tiles bn
    wide: one CTA per SM at most (persistent) over the tiles (split-K: the tiles x splits work
    units), and one deterministic partial slot per tile column and per block of rows a consumer
    warpgroup evaluates (64 cooperative, 128 ping-pong: codegen/epilogue_sm90.staged_rows; only
    a tile's last split runs its epilogue, so split-K keeps these slots)."""
    tm, tn = tile_count(b.M, sm90.BM), tile_count(b.N, bn)
    ctas = min(b.L * tm * tn * splits, sm_count())
    return (ctas, 1, 1), (sm90.THREADS, 1, 1), (tn, tm * (sm90.BM // staged_rows(pingpong)), b.L)


def shared_bytes(program, deterministic, pingpong, aux_async, frag, bn, aux_ring=False):
    return smem_layout(program, deterministic, pingpong, aux_async, frag, bn, aux_ring).total


def extra_values(b, maps, bn):
    """The kernel's trailing parameters (codegen/mainloop_sm90.sm90_params): the map addresses
    (A, B, then the fragment epilogue's outputs), the watchdog word, the tile counts."""
    return [*maps, watchdog_pointer(), tile_count(b.M, sm90.BM), tile_count(b.N, bn)]


class SplitBuffers:
    """Split-K's fp32 partials and (tile, warpgroup) counters of one Runner (codegen/splitk.py),
    grown on demand. Counters are zeroed once, when allocated (on the launch's stream, ahead of
    the kernel), and every launch leaves them at zero. Buffers are never freed: a repeated-call
    replay (runtime/fastcall.py) or a CUDA graph keeps the addresses it recorded, so a grown
    pair replaces the current one and the old pair stays alive."""

    def __init__(self):
        self.current = None      # (partials, counters) DeviceBuffers
        self.old = []

    def pointers(self, b, bn, ns, stream, capturing):
        """[ns, partials address, counters address]: the split kernel's trailing parameters
        (codegen/splitk.PARAMS), or None where the buffers must grow during a CUDA-graph capture
        (the counters could not be zeroed outside the graph: the call then runs unsplit)."""
        tiles = b.L * tile_count(b.M, sm90.BM) * tile_count(b.N, bn)
        floats = splitk.workspace_floats(tiles, ns, bn)
        have = self.current
        if have is None or have[0].nbytes < 4 * floats or have[1].nbytes < 8 * tiles:
            if capturing:
                return None
            if have is not None:
                self.old.append(have)
            have = self.current = (driver.DeviceBuffer(4 * floats), driver.DeviceBuffer(8 * tiles))
            driver.memset32(have[1].ptr, 0, have[1].nbytes // 4, stream)
        return [ns, have[0].ptr, have[1].ptr]


def output_maps(b, program):
    """Per output, the geometry (dtype, dims, byte strides, box) of its TMA-store map: 64 x 64
    panels, 3-D where the output spans L (codegen/fragment_stores addresses it with l)."""
    return tuple((op.dtype, *sm90.panel_map(b.L, b.M, b.N, t.strides, program.spans(op)[0]))
                 for op, t in zip(program.outputs, b.outputs))


def ring_inputs(program, aux_ring):
    """Indices of the (M, N) inputs an aux_ring kernel TMA-loads (its maps tmX0, tmX1, ...)."""
    return tile_inputs(program) if aux_ring else []


def input_maps(b, program):
    """Per (M, N) input of an aux_ring kernel, the geometry of its TMA-load map: 64 x 64 panels,
    3-D where the input spans L (mainloop_sm90._aux_ring_loads addresses it with l)."""
    return tuple((op.dtype, *sm90.panel_map(b.L, b.M, b.N, b.inputs[k].strides,
                                            program.batched and program.spans(op)[0],
                                            DTYPES[op.dtype].itemsize))
                 for k, op in ((k, program.inputs[k]) for k in tile_inputs(program)))


def map_pointers(prob, a_ptr, b_ptr, kmajor, bn, stream, capturing, outs=()):
    """Device addresses of the maps of a call with tiles bn wide (A, B, then one per (pointer,
    geometry) in `outs`: the outputs' output_maps, then the aux_ring inputs' input_maps), written
    on `stream` ahead of the kernel
    (runtime/map_slots.py: also inside a CUDA-graph capture); None when capturing and no slot
    is free. A dictionary hit for addresses seen before (the repeated-call path refills them
    per call, runtime/fastcall.py)."""
    slots = _slots.get(2 + len(outs))
    if slots is None:
        slots = _slots[2 + len(outs)] = MapSlots(2 + len(outs))

    def encode():
        raw = _encode(prob, a_ptr, b_ptr, kmajor, bn)
        return raw + b"".join(tensormap.encode(ptr, dtype, dims, strides, box, backend="numba_cuda")
                              for ptr, (dtype, dims, strides, box) in outs)
    return slots.pointers((prob, a_ptr, b_ptr, kmajor, bn, outs), encode, stream, capturing)


class ReplayMaps:
    """The maps of one repeated-call signature (runtime/fastcall.py): map_pointers for new
    addresses, and its last answer again for the same addresses without rebuilding and hashing
    the nested slot key (prob, addresses, output geometries).

    Invariant: the remembered answer came from map_pointers outside a capture, so it is an eager
    slot's, and it is reused only outside a capture (a captured call must go through MapSlots,
    which hands the slot to the graph) and while that MapSlots has not recycled since."""

    def __init__(self, prob, kmajor, bn, geo):
        self.prob, self.kmajor, self.bn, self.geo, self.maps = prob, kmajor, bn, geo, 2 + len(geo)
        self._last = None        # (A, B, output addresses, MapSlots, its recycles, map pointers)

    def pointers(self, a_ptr, b_ptr, out_ptrs, stream, capturing):
        last = self._last
        if (not capturing and last is not None and last[0] == a_ptr and last[1] == b_ptr and last[2] == out_ptrs
                and last[3].recycles == last[4] and _slots.get(self.maps) is last[3]):
            return last[5]
        ptrs = map_pointers(self.prob, a_ptr, b_ptr, self.kmajor, self.bn, stream, capturing,
                            tuple(zip(out_ptrs, self.geo)))
        if ptrs is not None and not capturing:
            slots = _slots[self.maps]
            self._last = (a_ptr, b_ptr, out_ptrs, slots, slots.recycles, ptrs)
        return ptrs


def watchdog_pointer():
    """Device address of the process's watchdog word: pinned host memory mapped into the device,
    so the host can still read what a trapped kernel wrote after its context is lost."""
    global _watchdog
    if _watchdog is None:
        cu = driver.lib()
        host = ctypes.c_void_p()
        driver._check("cuMemHostAlloc", cu.cuMemHostAlloc(ctypes.byref(host), ctypes.c_size_t(4),
                                                          ctypes.c_uint(_HOSTALLOC_PORTABLE_DEVICEMAP)))
        dev = ctypes.c_uint64()
        driver._check("cuMemHostGetDevicePointer", cu.cuMemHostGetDevicePointer_v2(ctypes.byref(dev), host,
                                                                                   ctypes.c_uint(0)))
        word = ctypes.c_uint32.from_address(host.value)
        word.value = 0
        _watchdog = (word, dev.value)
    return _watchdog[1]


def check_watchdog():
    """Raise WatchdogError if any sm_90a kernel of this process has timed out (a host read of
    pinned memory: free, so every call checks)."""
    if _watchdog is None or not _watchdog[0].value:
        return
    code = _watchdog[0].value
    what = {WAIT_FULL: "a consumer waiting for a filled ring slot",
            WAIT_EMPTY: "the producer waiting for a released ring slot"}.get(code, f"code {code}")
    raise WatchdogError(f"the numba_cuda sm_90a kernel's watchdog fired ({what}): the kernel trapped instead of "
                        "hanging and the CUDA context is lost; rerun with sm90=False and report the tree and shapes")


_sms = {}


def sm_count():
    cu, dev = driver.lib(), ctypes.c_int()
    driver._check("cuCtxGetDevice", cu.cuCtxGetDevice(ctypes.byref(dev)))
    if dev.value not in _sms:
        n = ctypes.c_int()
        driver._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(ctypes.byref(n), _MULTIPROCESSOR_COUNT, dev))
        _sms[dev.value] = max(1, n.value)
    return _sms[dev.value]
