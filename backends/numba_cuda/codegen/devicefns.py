"""fp32 math helpers the generated GPU kernels call (numba device functions, inlined).

`runtime/simulator.py` defines the same names for the CUDA simulator. NaN handling follows the
contract in ops.py: maximum/minimum propagate NaN (CUDA's fmaxf would drop it).
"""
import math

from numba import cuda, float32

from ...gpu import gelu as _gelu
from ...gpu import gelu_tanh as _gt
from .ptx_sm90 import ex2_approx, rcp_approx

_HALF, _ONE, _THREE = float32(0.5), float32(1.0), float32(3.0)
_K, _A = float32(0.7978845608028654), float32(0.044715)
_SQRT_HALF, _INV_SQRT_2PI = float32(0.7071067811865476), float32(0.3989422804014327)
_NEG_LOG2E, _GELU_T = float32(-_gelu.LOG2E), float32(_gelu.GELU_T)
_PHI = tuple(float32(c) for c in _gelu.ACCURATE)      # gpu/gelu.py's accurate E(t), lowest degree first
_ZERO = float32(0.0)
_V_C1, _V_C3, _V_MAX = float32(_gt.V_C1), float32(_gt.V_C3), float32(_gt.V_MAX)
_G_C1, _G_C3 = float32(_gt.G_C1), float32(_gt.G_C3)


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
def gelu_tanh(x):
    # x sigmoid(2u) around one ex2.approx and one rcp.approx (gpu/gelu_tanh.py: why, and errors)
    v = x * (_V_C1 + _V_C3 * (x * x))
    s = rcp_approx(_ONE + ex2_approx(min(v, _V_MAX)))
    return x * _ZERO if v > _V_MAX else x * s


@cuda.jit(device=True, inline=True)
def gelu_tanh_grad(x):
    # s + x (G_C1 + G_C3 x^2) s (1 - s), s = sigmoid(2u), 1 - s = e s (gpu/gelu_tanh.py)
    x2 = x * x
    v = x * (_V_C1 + _V_C3 * x2)
    e = ex2_approx(min(v, _V_MAX))
    s = rcp_approx(_ONE + e)
    g = (x * (s * (e * s))) * (_G_C1 + _G_C3 * x2) + s
    return x * _ZERO if v > _V_MAX else g


@cuda.jit(device=True, inline=True)
def gelu_grad(x):
    # Phi(x) + x phi(x) as the cupy backend spells it (gpu/gelu.py): Phi(-|x|) = 2^(-t^2 log2 e
    # + E(min(t, T))), t = |x| / sqrt(2), phi(x) = 2^(-t^2 log2 e) / sqrt(2 pi); within erff +
    # expf's error of float64 without erf's two polynomials and their selects.
    t = abs(x) * _SQRT_HALF
    tc = min(t, _GELU_T)
    s = t * t
    e = _PHI[len(_PHI) - 1]
    for i in range(len(_PHI) - 2, -1, -1):
        e = e * tc + _PHI[i]
    h = math.exp2(_NEG_LOG2E * s + e)
    cdf = h if x < float32(0.0) else _ONE - h
    return cdf + (x * _INV_SQRT_2PI) * math.exp2(_NEG_LOG2E * s)
