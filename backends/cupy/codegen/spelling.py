"""CUDA C++ spelling of every elementwise op and reduction of `evt_core.tree.ops`.

Semantics live in `ELEMENTWISE[op].fn` (NumPy float32); each entry here must compute the same
thing in fp32 on the device. Accurate libm calls (tanhf, erff, expf) are used rather than the
`.approx` PTX forms so fp32 outputs stay within fp32 tolerance (the GELUs and their
derivatives excepted: one shared form each in backends/gpu, gelu.py and gelu_tanh.py, more
accurate than the op table's float32 formulas and cheaper than libm's); the backend option
fast_math=True swaps in FAST_SPELLING (tanh.approx / ex2.approx / rcp.approx) instead. max/min go through the
NaN-propagating helpers of the prelude, because CUDA's fmaxf drops NaN while np.maximum keeps it.
"""
import math

import numpy as np

from evt_core.tree.ops import Op

from ...gpu import gelu, gelu_tanh
from ...gpu.reductions import identity_bits

_GELU_K = "0.7978845608028654f"
_GELU_A = "0.044715f"

# op -> format string over the operand names a, b, c
CUDA_SPELLING = {
    Op.ADD: "{a} + {b}",
    Op.SUB: "{a} - {b}",
    Op.MUL: "{a} * {b}",
    Op.DIV: "{a} / {b}",
    Op.NEG: "-{a}",
    Op.LT: "({a} < {b} ? 1.0f : 0.0f)",
    Op.LE: "({a} <= {b} ? 1.0f : 0.0f)",
    Op.GT: "({a} > {b} ? 1.0f : 0.0f)",
    Op.GE: "({a} >= {b} ? 1.0f : 0.0f)",
    Op.MAXIMUM: "evt_max_nan({a}, {b})",
    Op.MINIMUM: "evt_min_nan({a}, {b})",
    Op.RELU: "evt_max_nan({a}, 0.0f)",
    Op.GELU: "{a} * 0.5f * (1.0f + erff({a} * 0.70710678118654752f))",
    Op.GELU_TANH: "evt_gelu_tanh({a})",
    Op.GELU_TANH_GRAD: "evt_gelu_tanh_grad({a})",
    Op.GELU_GRAD: "evt_gelu_grad({a})",
    Op.SIGMOID: "evt_sigmoid({a})",
    Op.SILU: "{a} * evt_sigmoid({a})",
    Op.TANH: "tanhf({a})",
    Op.EXP: "expf({a})",
    Op.LOG: "logf({a})",
    Op.SQRT: "sqrtf({a})",
    Op.ERF: "erff({a})",
    Op.RSQRT: "1.0f / sqrtf({a})",   # rsqrtf is approximate; NumPy divides by the rounded sqrt
    Op.ABS: "fabsf({a})",
    Op.MULTIPLY_ADD: "{a} * {b} + {c}",
    Op.WHERE: "({a} != 0.0f ? {b} : {c})",
}

# fast_math=True: these entries replace CUDA_SPELLING's. tanh.approx.f32 (max relative error
# about 2^-10.99, i.e. ~5e-4: fp16's own rounding step), ex2.approx.ftz.f32 on x*log2(e)
# (relative error ~2^-22 plus the rounding of the product: ~|x| * 2^-24 relative), and
# rcp.approx.ftz.f32 for sigmoid's division (~1 ulp), lg2.approx.ftz.f32 times ln 2 for log
# (absolute error ~2^-22: fastmath.APPROX_OPS, True only). Subnormal results flush to zero.
# The erf-form GELU's fast spelling is gpu/gelu.py's FAST polynomial around one ex2.approx; its
# derivative has no fast entry: its one spelling is already the ACCURATE polynomial.
FAST_SPELLING = {
    Op.GELU: "evt_gelu_fast({a})",
    Op.TANH: "evt_tanh_fast({a})",
    Op.EXP: "evt_exp_fast({a})",
    Op.LOG: "evt_log_fast({a})",
    Op.SIGMOID: "evt_sigmoid_fast({a})",
    Op.SILU: "{a} * evt_sigmoid_fast({a})",
    Op.GELU_TANH: "evt_gelu_tanh_fast({a})",
    Op.GELU_TANH_GRAD: "evt_gelu_tanh_grad_fast({a})",
}

# reduction op -> (combine expression over x, y; identity literal)
# (combine of two partials, identity): the identities are the op table's, as fp32 bit patterns
REDUCE_SPELLING = {op: (combine, f"__int_as_float({identity_bits(op):#010x})") for op, combine in (
    (Op.SUM, "{x} + {y}"), (Op.MEAN, "{x} + {y}"),
    (Op.AMAX, "evt_max_nan({x}, {y})"), (Op.AMIN, "evt_min_nan({x}, {y})"))}


def float_literal(value):
    """An fp32 C literal equal to np.float32(value): a hex float of the already-rounded value, so
    no decimal-to-binary rounding happens in the compiler."""
    v = float(np.float32(value))
    if math.isnan(v):
        return "__int_as_float(0x7fffffff)"
    if math.isinf(v):
        return "__int_as_float(0x7f800000)" if v > 0 else "__int_as_float(0xff800000)"
    return f"({v.hex()}f)"


def _horner(coeffs, var):
    expr = float_literal(coeffs[-1])
    for c in coeffs[-2::-1]:
        expr = f"fmaf({expr}, {var}, {float_literal(c)})"
    return expr


def _phi(name, coeffs):
    """Phi(x) of gpu/gelu.py with the polynomial `coeffs`; also sets s = t * t."""
    return f"""// Phi(x): Phi(-|x|) = 2^(-t^2 log2 e + E(min(t, T))), t = |x| / sqrt(2) (gpu/gelu.py)
__device__ __forceinline__ float {name}(float x, float& s) {{
  const float t = fabsf(x) * {float_literal(gelu.SQRT_HALF)}, tc = fminf(t, {float_literal(gelu.GELU_T)});
  s = t * t;
  float h; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(h) : "f"(fmaf({float_literal(-gelu.LOG2E)}, s, {_horner(coeffs, "tc")})));
  return x < 0.0f ? h : 1.0f - h;
}}"""


# device helpers the spellings above rely on (emitted once in the prelude)
MATH_HELPERS = f"""
// NaN-propagating max/min: np.maximum semantics (CUDA fmaxf would drop the NaN)
__device__ __forceinline__ float evt_max_nan(float a, float b) {{ return (a > b || a != a) ? a : b; }}
__device__ __forceinline__ float evt_min_nan(float a, float b) {{ return (a < b || a != a) ? a : b; }}
__device__ __forceinline__ float evt_sigmoid(float x) {{ return 1.0f / (1.0f + expf(-x)); }}
// the tanh-form GELU and its derivative through s = sigmoid(2u) = (1 + tanh u) / 2, around one
// ex2.approx and one rcp.approx (gpu/gelu_tanh.py: the form, its errors, why v is clamped)
__device__ __forceinline__ float evt_sigmoid_2u(float x, float& e, float& v) {{
  float s;
  v = x * ({float_literal(gelu_tanh.V_C1)} + {float_literal(gelu_tanh.V_C3)} * (x * x));
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(fminf(v, {float_literal(gelu_tanh.V_MAX)})));
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(1.0f + e));
  return s;
}}
__device__ __forceinline__ float evt_gelu_tanh(float x) {{
  float e, v;
  const float s = evt_sigmoid_2u(x, e, v);
  return v > {float_literal(gelu_tanh.V_MAX)} ? x * 0.0f : x * s;
}}
__device__ __forceinline__ float evt_gelu_tanh_grad(float x) {{
  float e, v;
  const float s = evt_sigmoid_2u(x, e, v);
  const float g = fmaf(x * (s * (e * s)), {float_literal(gelu_tanh.G_C1)} + {float_literal(gelu_tanh.G_C3)} * (x * x), s);
  return v > {float_literal(gelu_tanh.V_MAX)} ? x * 0.0f : g;
}}
{_phi("evt_phi_accurate", gelu.ACCURATE)}
{_phi("evt_phi_fast", gelu.FAST)}
// d/dx of the erf-form GELU (ops._gelu_grad): Phi(x) + x * phi(x), phi(x) = 2^(-t^2 log2 e) / sqrt(2 pi)
__device__ __forceinline__ float evt_gelu_grad(float x) {{
  float s, g;
  const float p = evt_phi_accurate(x, s);
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(g) : "f"({float_literal(-gelu.LOG2E)} * s));
  return p + (x * {float_literal(gelu.INV_SQRT_2PI)}) * g;
}}
__device__ __forceinline__ float evt_gelu_fast(float x) {{ float s; return x * evt_phi_fast(x, s); }}
// ---- fast_math=True spellings (FAST_SPELLING): MUFU approximations ----
__device__ __forceinline__ float evt_tanh_fast(float x) {{ float y; asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }}
__device__ __forceinline__ float evt_exp_fast(float x) {{
  float y; asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x * 1.4426950408889634f)); return y;
}}
__device__ __forceinline__ float evt_log_fast(float x) {{
  float y; asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y * 0.6931471805599453f;
}}
__device__ __forceinline__ float evt_rcp_fast(float x) {{ float y; asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x)); return y; }}
__device__ __forceinline__ float evt_sigmoid_fast(float x) {{ return evt_rcp_fast(1.0f + evt_exp_fast(-x)); }}
__device__ __forceinline__ float evt_gelu_tanh_fast(float x) {{
  return 0.5f * x * (1.0f + evt_tanh_fast({_GELU_K} * (x + {_GELU_A} * x * x * x)));
}}
__device__ __forceinline__ float evt_gelu_tanh_grad_fast(float x) {{
  float t = evt_tanh_fast({_GELU_K} * (x + {_GELU_A} * x * x * x));
  return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * {_GELU_K} * (1.0f + 3.0f * {_GELU_A} * x * x);
}}
"""


def spell(op, args, fast=False):
    """The C expression of `op` applied to the operand expressions `args` (`fast`: the
    fast_math=True table where it has an entry)."""
    names = dict(zip("abc", args))
    table = FAST_SPELLING if fast and op in FAST_SPELLING else CUDA_SPELLING
    return table[op].format(**names)
