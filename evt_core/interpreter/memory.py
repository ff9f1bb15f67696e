"""Host memory for the NumPy evaluators: the fp32 accumulator, with a typed error (naming the
size) instead of NumPy's MemoryError when the problem does not fit in host memory."""
import numpy as np

from ..errors import ResourceError


def accumulate(A, B, frame):
    """A @ B in fp32 as an (L, M, N) array (L = 1 for a rank-2 problem)."""
    L, M, N = frame
    try:
        acc = np.matmul(A.astype(np.float32), B.astype(np.float32)).astype(np.float32, copy=False)
    except MemoryError:
        raise ResourceError(f"the fp32 accumulator of the (L, M, N) = {frame} problem needs "
                            f"{_gib(4 * L * M * N)} of host memory, more than is free; "
                            "split the problem or run it on a GPU backend") from None
    return acc.reshape((1,) * (3 - acc.ndim) + acc.shape)


def _gib(nbytes):
    return f"{nbytes / 2 ** 30:.1f} GiB"
