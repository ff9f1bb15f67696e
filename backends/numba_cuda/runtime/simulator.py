"""The simulator's stand-ins for `codegen/ptx.py` and `codegen/devicefns.py`: same names, same
meaning, on the NumPy arrays the CUDA simulator passes where the GPU build passes raw pointers.

Under NUMBA_ENABLE_CUDASIM=1 kernels run as Python threads, so inline PTX cannot exist; the
generated SIMT kernel source is identical in both builds and only this namespace changes.
Tensor-core kernels are GPU-only and never use this module.
"""
import threading

import numpy as np
from numba import cuda, float32

_F = np.float32
_lock = threading.Lock()    # red_add/red_max read-modify-write: threads must not interleave


def ld_f32(a, off):
    return _F(a[off])


ld_f16 = ld_bf16 = ld_f32


def st_f32(a, off, v):
    a[off] = v          # the array's dtype rounds to nearest even (float16 in NumPy)


st_f16 = st_bf16 = st_f32


def st_f32_if(a, off, v, ok):
    if ok:
        a[off] = v


st_f16_if = st_bf16_if = st_f32_if


def red_add(ws, off, v):
    with _lock:
        ws[off] = _F(ws[off]) + _F(v)


def red_max(ws, off, v):
    with _lock:
        ws[off] = nan_max(_F(ws[off]), _F(v))


def smem_base(arr):
    return arr          # shared arrays are addressed by index in the simulator


def lds(arr, idx):
    return _F(arr[idx])


def sts(arr, idx, v):
    arr[idx] = v


def nan_max(a, b):
    return a if (a > b or a != a) else b


def nan_min(a, b):
    return a if (a < b or a != a) else b


@cuda.jit(device=True)
def shfl_xor(v, lanes):
    """The GPU's shfl.bfly for the simulator's 1-D blocks: every thread of the block calls it at
    the same point (as on the GPU, where whole warps do), so a block-wide exchange is exact."""
    buf = cuda.shared.array(1024, float32)
    t = cuda.threadIdx.x
    cuda.syncthreads()
    buf[t] = v
    cuda.syncthreads()
    r = buf[t ^ lanes]
    cuda.syncthreads()
    return r


def _np1(fn):
    def f(*xs):
        with np.errstate(all="ignore"):
            return _F(fn(*[_F(x) for x in xs]))
    return f


f_div = _np1(np.divide)
f_exp, f_log, f_sqrt, f_tanh = _np1(np.exp), _np1(np.log), _np1(np.sqrt), _np1(np.tanh)
f_erf = _np1(lambda x: np.float32(__import__("math").erf(float(x))))


def select_f32(c, a, b):
    return _F(a) if c != 0 else _F(b)


def gelu_tanh(x):
    from evt_core.tree.ops import ELEMENTWISE, Op
    return _F(ELEMENTWISE[Op.GELU_TANH].fn(_F(x)))


def gelu_tanh_grad(x):
    from evt_core.tree.ops import ELEMENTWISE, Op
    return _F(ELEMENTWISE[Op.GELU_TANH_GRAD].fn(_F(x)))


def gelu_grad(x):
    from evt_core.tree.ops import ELEMENTWISE, Op
    return _F(ELEMENTWISE[Op.GELU_GRAD].fn(_F(x)))


__all__ = [n for n in dir() if not n.startswith("_") and n not in ("np", "threading", "float32", "cuda")]
