"""The tanh-form GELU and its derivative as one ex2.approx and one rcp.approx: the constants and
a NumPy float32 emulation, shared by both GPU backends' accurate spellings.

With u = sqrt(2/pi) (x + 0.044715 x^3) and t = tanh(u), the op table's formulas
(evt_core.tree.ops) read, through s = (1 + t) / 2 = sigmoid(2u) = 1 / (1 + e), e = exp(-2u):

    gelu_tanh(x)  = x s
    gelu_tanh'(x) = s + 2 sqrt(2/pi) x (1 + 3 * 0.044715 x^2) s (1 - s)

so each costs one ex2.approx (of v = -2u log2 e, a polynomial in x) and one rcp.approx, and
neither cancels where it matters: libdevice's tanhf (two MUFUs too, plus its small-argument
polynomial and range selects) then 1 + t and 1 - t^2 cancel for u << 0, where these forms keep
their relative accuracy. W2 (bench/workloads.py), whose dbias sum makes fast_math="auto" keep
the accurate spelling, spent 27 fp32 instructions a value in the tanhf form (bench/SASS-numba.md).

Nothing is clamped or selected: for large v (x below about -10) e = 2^v overflows to +inf or
1 + e's reciprocal falls below fp32's normal range, and rcp.approx.ftz gives s = 0 either way;
then gelu_tanh = x s and gelu_tanh' = (x w) p + s with w = s (1 - s) = s - s^2 (one FFMA) give
x * 0 as the op table's formulas do there (t rounds to -1): -0 for finite x (gelu_tanh';
+0, the same value), NaN for x = -inf. NaN propagates through x. The earlier form clamped v, took
1 - s as e s and selected x * 0 past the clamp: four more instructions a value (W2's epilogue
spent 19 a value, bench/RESULTS.md). s - s^2 loses relative accuracy where s rounds near 1 (x
above 3 or so), but only in the correction term: gelu_tanh' is near 1 there and its absolute
error stays below 3e-6 (2e-7 before), far below the 16-bit stores and fp32 sums it feeds.
ERROR_BOUNDS are what tests/gpu_layer/test_gelu_tanh.py asserts of the float32 emulation
against float64 (ex2.approx and rcp.approx modelled as correctly rounded and flushing subnormal
results to zero; their documented 2 and 1 ulp add about 2e-7 relative on the device). The op
table's own float32 formulas are off by up to 9e-5 (gelu_tanh) and 4e-4 (gelu_tanh', |value| >
1e-3) relative on the same grid.
"""
import numpy as np

K = 0.7978845608028654            # sqrt(2 / pi)
A = 0.044715
LOG2E = 1.4426950408889634
V_C1 = -2.0 * K * LOG2E           # v = x (V_C1 + V_C3 x^2) = -2u log2 e
V_C3 = -2.0 * K * A * LOG2E
G_C1 = 2.0 * K                    # gelu' = x (G_C1 + G_C3 x^2) (s - s^2) + s
G_C3 = 6.0 * K * A

# (absolute error anywhere, relative error where |value| > 1e-3) of the float32 emulation on
# [-12, 12]: gelu_tanh' crosses zero near x = -0.75, so its relative error has no useful bound
ERROR_BOUNDS = {"gelu_tanh": (1e-6, 2e-6), "gelu_tanh_grad": (3e-6, 1e-4)}


def _ftz(a):
    """fp32 with subnormal results flushed to (signed) zero, as the .ftz instructions do."""
    return np.where(np.abs(a) < np.finfo(np.float32).tiny, a * np.float32(0), a).astype(np.float32)


def _sigmoid_2u(x):
    """(s, x^2) in float32, step by step as the backends spell them."""
    f = np.float32
    x = np.asarray(x, np.float32)
    x2 = (x * x).astype(np.float32)
    v = (x * (f(V_C1) + f(V_C3) * x2).astype(np.float32)).astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = _ftz(np.exp2(v.astype(np.float64)).astype(np.float32))                 # ex2.approx.ftz
        s = _ftz((1.0 / (f(1) + e).astype(np.float64)).astype(np.float32))          # rcp.approx.ftz
    return s, x2


def gelu_tanh_emulated(x):
    """x s."""
    x = np.asarray(x, np.float32)
    s, _ = _sigmoid_2u(x)
    with np.errstate(invalid="ignore"):
        return (x * s).astype(np.float32)


def gelu_tanh_grad_emulated(x):
    """(x w) (G_C1 + G_C3 x^2) + s, w = s - s^2 (each FFMA rounded once)."""
    f = np.float32
    x = np.asarray(x, np.float32)
    s, x2 = _sigmoid_2u(x)
    sd = s.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        w = (sd - sd * sd).astype(np.float32)
        p = (f(G_C1) + f(G_C3) * x2).astype(np.float32)
        return ((x * w).astype(np.float32).astype(np.float64) * p + sd).astype(np.float32)
