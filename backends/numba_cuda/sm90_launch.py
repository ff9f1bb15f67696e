"""Host side of the sm_90a kernel: whether a call fits it, its tensor maps, grid and watchdog.

A call fits when the device is sm_90, A and B are fp16/bf16, A is K-contiguous, B is K- or
N-contiguous, and every base and row/batch stride satisfies TMA's 16-byte rules; anything else
runs the mma.sync kernel, and the Runner records why under kernel.stages["sm90"].

Tensor maps live in global memory (numba's ABI passes no 128-byte by-value parameter): the two
maps of a call are encoded on the host (backends/gpu/tensormap.py, cached by pointer and
shape) and uploaded once per distinct pair into a device buffer that is never rewritten, so a
kernel still in flight never sees a map change under it.
"""
import ctypes

from evt_core.errors import EvtError, KernelCompileError

from ..gpu import sm90, tensormap
from . import driver
from .kernel_sm90 import BN, STAGES, WAIT_EMPTY, WAIT_FULL
from .sm90_epilogue import SmemLayout

_MULTIPROCESSOR_COUNT = 16        # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
_HOSTALLOC_PORTABLE_DEVICEMAP = 0x03
_maps = {}                        # 256 bytes of (A map, B map) -> DeviceBuffer holding them
_MAX_MAPS = 128
_watchdog = None


class WatchdogError(EvtError, RuntimeError):
    """A bounded mbarrier wait of the sm_90a kernel timed out (a pipeline bug, never a slow
    GPU); the kernel trapped, so the CUDA context is lost."""


def refusal(b, a_ptr, b_ptr, cc, encode=True):
    """None when the call fits the sm_90a kernel, else the reason it does not. encode: also ask
    the driver for both tensor maps (it has rules of its own; the maps are cached for the launch)."""
    if cc != (9, 0):
        return f"the device is sm_{cc[0]}{cc[1]}; the wgmma/TMA kernel needs sm_90"
    if b.dtype not in ("float16", "bfloat16"):
        return f"{b.dtype} operands (wgmma here takes fp16/bf16)"
    if min(b.M, b.N, b.K) == 0:
        return "an empty problem dimension (TMA maps need extents >= 1)"
    (aL, aM, aK), (bL, bK, bN) = b.a_strides, b.b_strides
    if not (aK == 1 and aM > 0 and sm90.tma_rows_ok(a_ptr, aM, aL)):
        return (f"A strides {b.a_strides} at address {a_ptr:#x}: TMA needs K-contiguous A with a 16-byte aligned "
                "base and 16-byte multiple row and batch strides (K % 8 == 0 for a dense A)")
    if b_kmajor(b) is None or not sm90.tma_rows_ok(b_ptr, bN if bK == 1 else bK, bL):
        return (f"B strides {b.b_strides} at address {b_ptr:#x}: TMA needs unit stride along K or N, a 16-byte "
                "aligned base and 16-byte multiple row and batch strides")
    if max(b.L * _tiles(b.M, sm90.BM) * _tiles(b.N, BN), b.M, b.N, b.K) >= 2 ** 31:
        return "a problem too large for the kernel's 32-bit tile arithmetic"
    if encode:
        try:
            _encode(b, a_ptr, b_ptr, b_kmajor(b))
        except KernelCompileError as e:
            return f"the driver refused a tensor map ({e})"
    return None


def _encode(b, a_ptr, b_ptr, kmajor):
    """The 256 bytes of the A and B maps."""
    amap, bmap = sm90.operand_maps(b.L, b.M, b.N, b.K, b.a_strides, b.b_strides, kmajor, BN)
    return (tensormap.encode(a_ptr, b.dtype, *amap, backend="numba_cuda")
            + tensormap.encode(b_ptr, b.dtype, *bmap, backend="numba_cuda"))


def b_kmajor(b):
    """True: B is K-contiguous ((N, K) storage); False: N-contiguous; None: neither (the cupy
    backend's rule, so both backends pick the same B layout)."""
    _, bK, bN = b.b_strides
    if bK == 1 and bN != 1:
        return True
    return False if bN == 1 else None


def _tiles(n, t):
    return -(-n // t)


def grid(b):
    """(launch grid, block, the reduction partial grid (n blocks, m blocks, L)): one CTA per SM at
    most (persistent), and one deterministic partial slot per 64-row consumer block."""
    tm, tn = _tiles(b.M, sm90.BM), _tiles(b.N, BN)
    ctas = min(b.L * tm * tn, _sm_count())
    return (ctas, 1, 1), (sm90.THREADS, 1, 1), (tn, tm * (sm90.BM // sm90.WG_ROWS), b.L)


def shared_bytes(program, deterministic):
    return SmemLayout(program, BN, STAGES, deterministic).total


def extra_values(b, a_ptr, b_ptr, kmajor):
    """The kernel's trailing parameters (kernel_sm90.sm90_params): maps, watchdog word, tiles."""
    raw = _encode(b, a_ptr, b_ptr, kmajor)
    buf = _maps.get(raw)
    if buf is None:
        if len(_maps) >= _MAX_MAPS:      # a kernel in flight may still read an old buffer
            driver._check("cuCtxSynchronize", driver.lib().cuCtxSynchronize())
            _maps.clear()
        buf = driver.DeviceBuffer(256)
        host = (ctypes.c_uint8 * 256).from_buffer_copy(raw)
        driver._check("cuMemcpyHtoD", driver.lib().cuMemcpyHtoD_v2(ctypes.c_uint64(buf.ptr), host,
                                                                   ctypes.c_size_t(256)))
        _maps[raw] = buf
    return [buf.ptr, buf.ptr + 128, watchdog_pointer(), _tiles(b.M, sm90.BM), _tiles(b.N, BN)]


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


def _sm_count():
    cu, dev = driver.lib(), ctypes.c_int()
    driver._check("cuCtxGetDevice", cu.cuCtxGetDevice(ctypes.byref(dev)))
    if dev.value not in _sms:
        n = ctypes.c_int()
        driver._check("cuDeviceGetAttribute", cu.cuDeviceGetAttribute(ctypes.byref(n), _MULTIPROCESSOR_COUNT, dev))
        _sms[dev.value] = max(1, n.value)
    return _sms[dev.value]


def describe(b, kmajor):
    tiles = b.L * _tiles(b.M, sm90.BM) * _tiles(b.N, BN)
    return (f"sm_90a warp-specialised kernel: {b.dtype}, tile {sm90.BM}x{BN}x{sm90.BK}, {STAGES} stages, "
            f"B {'K' if kmajor else 'N'}-major, {tiles} tiles over a persistent grid")
