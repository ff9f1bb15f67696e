"""Phi(x), the normal CDF inside the erf-form GELU and its derivative, as a polynomial around one
ex2.approx: the coefficients and a NumPy float32 emulation, shared by both GPU backends' spellings.

libdevice's erff evaluates two polynomials and selects between them (9 FSEL a value in BERT's
FFN epilogue kernel); this form takes 11 SASS instructions a value fewer there, and the
GELU backward 15 fewer than erff + expf (bench/SASS-cupy.md). With t = |x| / sqrt(2):

    Phi(-|x|) = erfc(t) / 2 = 2^(-t^2 log2(e) + E(t)),   E(t) = log2(erfcx(t) / 2),

where E is smooth and slowly varying, so a short polynomial in min(t, T) fits it; then
Phi(x) = h for x < 0 and 1 - h otherwise, h = 2^(...). Only the negative side is ever computed,
so the tail keeps its relative accuracy (0.5 * (1 + erff(x / sqrt 2)) cancels there). Past T
(|x| > 5.3) E is held at E(T): Phi(-5.3) is 6e-8, and the error stays far below any result.

Two weighted minimax fits on [0, T]. Errors below are from the fp32 emulation here against
float64 (tests/gpu_layer/test_gelu.py asserts them; erff and expf modelled as correctly rounded
for the comparison figures) unless marked H200:
  * FAST (degree 6, fit error 2.8e-5 in log2 units): gelu's relative error < 2.2e-5 wherever
    |gelu| reaches fp16's subnormals (x > -5.3); Phi's absolute error < 1e-5. Stored in fp16 it
    rounds differently from the exact value on 0.7 % of inputs (erff's spelling: 7 %), at most 2
    ulp for both; on the H200, 0.061 fp16 ulp at most against erff's 2.07 (docs/semantics.md).
    Too coarse for fp32 results: fastmath.FAST_OPS, taken for 16-bit results only.
  * ACCURATE (degree 10): gelu_grad = Phi(x) + x phi(x) within 1.7e-7 absolute and 6e-5 relative
    (|gelu_grad| > 1e-3) of float64, as erff + expf's spelling is (1.3e-7, 3.9e-5): the spelling
    of GELU_GRAD, which feeds fp32 bias-gradient sums.
"""
import numpy as np

GELU_T = 3.75
LOG2E = 1.4426950408889634
SQRT_HALF = 0.7071067811865476
INV_SQRT_2PI = 0.3989422804014327
FAST = (-1.0000277757644653, -1.6273488998413086, 0.5226460099220276, -0.14775535464286804,
        0.030378548428416252, -0.003847773652523756, 0.00021957351418677717)
ACCURATE = (-0.9999998807907104, -1.6279162168502808, 0.5243464708328247, -0.14868837594985962,
            0.028483441099524498, -0.0007472170982509851, -0.0017614845419302583, 0.0006818241672590375,
            -0.0001337243156740442, 1.4259003364713863e-05, -6.545353130604781e-07)


def phi_emulated(x, coeffs):
    """(Phi(x), t * t) in float32, operation by operation as the backends spell it (fma where
    they use one; 2^x in float64 stands for ex2.approx's ~2^-22 relative error)."""
    f = np.float32
    x = np.asarray(x, np.float32)
    t = (np.abs(x) * f(SQRT_HALF)).astype(np.float32)
    tc = np.minimum(t, f(GELU_T))
    e = np.full_like(tc, f(coeffs[-1]))
    for c in coeffs[-2::-1]:
        e = (e.astype(np.float64) * tc + f(c)).astype(np.float32)
    s = (t * t).astype(np.float32)
    h = np.exp2((f(-LOG2E) * s.astype(np.float64) + e).astype(np.float32).astype(np.float64)).astype(np.float32)
    return np.where(x < 0, h, (f(1) - h).astype(np.float32)), s


def gelu_emulated(x):
    """The fast GELU, x * Phi(x) with FAST."""
    x = np.asarray(x, np.float32)
    phi, _ = phi_emulated(x, FAST)
    with np.errstate(invalid="ignore"):                 # -inf * 0 is NaN, as x * Phi(x) in fp32
        return (x * phi).astype(np.float32)


def gelu_grad_emulated(x):
    """GELU_GRAD, Phi(x) + x phi(x) with ACCURATE, phi(x) = 2^(-t^2 log2 e) / sqrt(2 pi)."""
    f = np.float32
    x = np.asarray(x, np.float32)
    phi, s = phi_emulated(x, ACCURATE)
    g = np.exp2((f(-LOG2E) * s).astype(np.float32).astype(np.float64)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        return (phi + (x * f(INV_SQRT_2PI)).astype(np.float32) * g).astype(np.float32)
