"""TMA tensor maps through the driver's cuTensorMapEncodeTiled, called with ctypes (no
cuda-python needed; hopper-gemm-notes §5 found the bytes identical to cuda.bindings').

A map embeds the data pointer, so it is rebuilt when an array changes; a small cache keyed by
(pointer, dims, strides, box) keeps repeated calls on the same buffers at dictionary cost.
`encode` returns the 128 bytes; each backend passes them in its own way (by value as a kernel
parameter, or copied to global memory).
"""
import ctypes

from evt_core.errors import KernelCompileError

DTYPE_CODES = {"float16": 6, "float32": 7, "bfloat16": 9}
INTERLEAVE_NONE, SWIZZLE_128B, L2_PROMOTION_256B, OOB_FILL_ZERO = 0, 3, 3, 0
_lib = None
_cache = {}


def _driver():
    global _lib
    if _lib is None:
        lib = ctypes.CDLL("libcuda.so.1")
        f = lib.cuTensorMapEncodeTiled
        f.restype = ctypes.c_int
        f.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                      ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint64),
                      ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
                      ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
        _lib = f
    return _lib


def encode(ptr, dtype, dims, byte_strides, box, swizzle=SWIZZLE_128B, backend="gpu"):
    """The 128-byte map. dims: innermost first; byte_strides: of dims[1:]; box: innermost first."""
    key = (ptr, dtype, tuple(dims), tuple(byte_strides), tuple(box), swizzle)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    rank = len(dims)
    buf = (ctypes.c_uint8 * 128)()
    res = _driver()(ctypes.addressof(buf), DTYPE_CODES[dtype], rank, ctypes.c_void_p(ptr),
                    (ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(rank - 1, 1))(*byte_strides),
                    (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)),
                    INTERLEAVE_NONE, swizzle, L2_PROMOTION_256B, OOB_FILL_ZERO)
    if res != 0:
        raise KernelCompileError(backend, "cuTensorMapEncodeTiled",
                                 f"error {res} for dims {dims}, strides {byte_strides}, box {box}")
    raw = bytes(buf)
    if len(_cache) > 256:
        _cache.clear()
    _cache[key] = raw
    return raw
