"""fp32 math helpers the generated GPU kernels call (numba device functions, inlined).

`runtime/simulator.py` defines the same names for the CUDA simulator. NaN handling follows the
contract in ops.py: maximum/minimum propagate NaN (CUDA's fmaxf would drop it).
"""
import math

from numba import cuda, float32

_HALF, _ONE, _THREE = float32(0.5), float32(1.0), float32(3.0)
_K, _A = float32(0.7978845608028654), float32(0.044715)
_SQRT_HALF, _INV_SQRT_2PI = float32(0.7071067811865476), float32(0.3989422804014327)


@cuda.jit(device=True, inline=True)
def nan_max(a, b):
    return a if (a > b or a != a) else b


@cuda.jit(device=True, inline=True)
def nan_min(a, b):
    return a if (a < b or a != a) else b


@cuda.jit(device=True, inline=True)
def shfl_xor(v, lanes):
    """v of the lane `lanes` away by xor (all 32 lanes take part: call sites are warp-uniform)."""
    return cuda.shfl_xor_sync(0xFFFFFFFF, v, lanes)


@cuda.jit(device=True, inline=True)
def f_div(a, b):
    return a / b


@cuda.jit(device=True, inline=True)
def f_exp(x):
    return math.exp(x)


@cuda.jit(device=True, inline=True)
def f_log(x):
    return math.log(x)


@cuda.jit(device=True, inline=True)
def f_sqrt(x):
    return math.sqrt(x)


@cuda.jit(device=True, inline=True)
def f_tanh(x):
    return math.tanh(x)


@cuda.jit(device=True, inline=True)
def f_erf(x):
    return math.erf(x)


@cuda.jit(device=True, inline=True)
def gelu_tanh_grad(x):
    # Term by term as ops._gelu_tanh_grad writes it.
    t = math.tanh(_K * (x + _A * x * x * x))
    return _HALF * (_ONE + t) + _HALF * x * (_ONE - t * t) * _K * (_ONE + _THREE * _A * x * x)


@cuda.jit(device=True, inline=True)
def gelu_grad(x):
    # Term by term as ops._gelu_grad writes it (erf's argument is an fp32 product here; the
    # reference forms it in float64, well under a ulp of the result apart).
    cdf = _HALF * (_ONE + math.erf(x * _SQRT_HALF))
    return cdf + x * (math.exp(-_HALF * x * x) * _INV_SQRT_2PI)
