"""The tanh-form GELU and its derivative as one ex2.approx and one rcp.approx: the constants and
a NumPy float32 emulation, shared by both GPU backends' accurate spellings.

With u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u), the op table's formulas
(evt_core.tree.ops) read, through s = (1 + t) / 2 = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):

    gelu_tanh(x)  = x s
    gelu_tanh'(x) = s + 2 sqrt(2/pi) x (1 + 3 * 0.044715 x^2) s (1 - s),   1 - s = e s

so each costs one ex2.approx (of v = -2u log2 e, a polynomial in x) and one rcp.approx, and no
cancellation: libdevice's tanhf (two MUFUs too, plus its small-argument polynomial and range
selects) then 1 + t and 1 - t^2 cancel for u << 0, where these forms keep their relative
accuracy. W2 (bench/workloads.py), whose dbias sum makes fast_math="auto" keep the accurate
spelling, spent 27 fp32 instructions a value in the tanhf form (bench/SASS-numba.md).

v is clamped at V_MAX so e stays finite (1 + e and e s then never overflow or make inf * 0);
past it (x < -8.6 or so) both results are below 1e-33 and are returned as x * 0 (-0, or NaN
for x = -inf), as the op table's formulas give there (t rounds to -1). NaN propagates through x.
ERROR_BOUNDS are what tests/gpu_layer/test_gelu_tanh.py asserts of the float32 emulation
against float64 (ex2.approx and rcp.approx modelled as correctly rounded; their documented 2
and 1 ulp add about 2e-7 relative on the device). The op table's own float32 formulas are off
by up to 9e-5 (gelu_tanh) and 4e-4 (gelu_tanh', |value| > 1e-3) relative on the same grid.
"""
import numpy as np

K = 0.7978845608028654            # sqrt(2 / pi)
A = 0.044715
LOG2E = 1.4426950408889634
V_C1 = -2.0 * K * LOG2E           # v = x (V_C1 + V_C3 x^2) = -2u log2 e
V_C3 = -2.0 * K * A * LOG2E
G_C1 = 2.0 * K                    # gelu' = s + x (G_C1 + G_C3 x^2) s (e s)
G_C3 = 6.0 * K * A
V_MAX = 126.0                     # e = 2^v <= 2^126: 1 + e, its reciprocal and e s stay normal

# (absolute error anywhere, relative error where |value| > 1e-3) of the float32 emulation on
# [-12, 12]: gelu_tanh' crosses zero near x = -0.75, so its relative error has no useful bound
ERROR_BOUNDS = {"gelu_tanh": (1e-6, 2e-6), "gelu_tanh_grad": (5e-7, 1e-4)}


def _parts(x):
    """(s, e, v) in float32, step by step as the backends spell them."""
    f = np.float32
    x = np.asarray(x, np.float32)
    x2 = (x * x).astype(np.float32)
    v = (x * (f(V_C1) + f(V_C3) * x2).astype(np.float32)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        vc = np.where(v > f(V_MAX), f(V_MAX), v).astype(np.float32)     # NaN stays NaN
        e = np.exp2(vc.astype(np.float64)).astype(np.float32)             # ex2.approx
        s = (1.0 / (f(1) + e).astype(np.float64)).astype(np.float32)      # rcp.approx
    return s, e, v, x2


def gelu_tanh_emulated(x):
    """x s, x * 0 where v > V_MAX."""
    x = np.asarray(x, np.float32)
    s, _, v, _ = _parts(x)
    with np.errstate(invalid="ignore"):
        return np.where(v > np.float32(V_MAX), x * np.float32(0), (x * s).astype(np.float32))


def gelu_tanh_grad_emulated(x):
    """s + x (G_C1 + G_C3 x^2) s (e s), x * 0 where v > V_MAX."""
    f = np.float32
    x = np.asarray(x, np.float32)
    s, e, v, x2 = _parts(x)
    with np.errstate(invalid="ignore", over="ignore"):
        w = (s * (e * s).astype(np.float32)).astype(np.float32)
        p = (f(G_C1) + f(G_C3) * x2).astype(np.float32)
        g = (((x * w).astype(np.float32) * p).astype(np.float32) + s).astype(np.float32)
        return np.where(v > f(V_MAX), x * f(0), g)
