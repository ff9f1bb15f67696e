"""TMA tensor maps for the cupy sm_90a kernels: the shared encoder (backends/gpu/tensormap.py)
wrapped as a size-1 numpy void array, which CuPy passes by value (a __grid_constant__ param)."""
import numpy as np

from ...gpu import tensormap as _tm

_SWIZZLE_128B = _tm.SWIZZLE_128B
_blobs = {}


def map_bytes(ptr, dtype, dims, byte_strides, box, swizzle=_SWIZZLE_128B):
    """The map's 128 bytes. dims: innermost first; byte_strides: of dims[1:]; box: innermost first."""
    return _tm.encode(ptr, dtype, dims, byte_strides, box, swizzle, backend="cupy")


def tensor_map(ptr, dtype, dims, byte_strides, box, swizzle=_SWIZZLE_128B):
    """map_bytes as the size-1 void array CuPy passes by value."""
    raw = map_bytes(ptr, dtype, dims, byte_strides, box, swizzle)
    blob = _blobs.get(raw)
    if blob is None:
        blob = np.frombuffer(raw, np.uint8).copy().view(np.dtype((np.void, 128)))
        if len(_blobs) > 256:
            _blobs.clear()
        _blobs[raw] = blob
    return blob


def dummy_map():
    """Placeholder for a map the kernel never reads (e.g. no TMA-stored output)."""
    return np.zeros(1, np.dtype((np.void, 128)))
