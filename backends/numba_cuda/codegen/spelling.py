"""How each elementwise `Op` is spelled in generated kernel source (fp32 throughout).

The semantics are `evt_core.tree.ops.ELEMENTWISE[op].fn`; these spellings follow those NumPy
expressions term by term so the GPU rounds the same way up to libdevice's ulp differences,
except the GELUs and their derivatives: one shared form each in backends/gpu (gelu.py,
gelu_tanh.py), more accurate than the op table's float32 formulas and cheaper than libdevice's.
Math goes through `f_*` helper names: on the GPU they are numba device functions over `math`
(libdevice), in the simulator NumPy float32 functions, because Python's `math` raises on a
domain error (log(-1)) where the contract asks for NaN.
"""
from evt_core.errors import UnsupportedError
from evt_core.tree.ops import Op

from ...gpu.gelu import FAST, GELU_T, LOG2E

# {0}, {1}, {2}: operand variable names. ONE, ZERO, HALF, ...: float32 constants in the prelude.
SPELLING = {
    Op.ADD: "{0} + {1}",
    Op.SUB: "{0} - {1}",
    Op.MUL: "{0} * {1}",
    Op.DIV: "f_div({0}, {1})",
    Op.NEG: "-{0}",
    Op.LT: "ONE if {0} < {1} else ZERO",
    Op.LE: "ONE if {0} <= {1} else ZERO",
    Op.GT: "ONE if {0} > {1} else ZERO",
    Op.GE: "ONE if {0} >= {1} else ZERO",
    Op.MAXIMUM: "nan_max({0}, {1})",
    Op.MINIMUM: "nan_min({0}, {1})",
    Op.RELU: "nan_max({0}, ZERO)",
    Op.GELU: "{0} * HALF * (ONE + f_erf({0} * SQRT_HALF))",
    Op.GELU_TANH: "gelu_tanh({0})",
    Op.GELU_TANH_GRAD: "gelu_tanh_grad({0})",
    Op.GELU_GRAD: "gelu_grad({0})",
    Op.SIGMOID: "ONE / (ONE + f_exp(-{0}))",
    Op.SILU: "{0} * (ONE / (ONE + f_exp(-{0})))",
    Op.TANH: "f_tanh({0})",
    Op.EXP: "f_exp({0})",
    Op.LOG: "f_log({0})",
    Op.SQRT: "f_sqrt({0})",
    Op.ERF: "f_erf({0})",
    Op.RSQRT: "ONE / f_sqrt({0})",
    Op.ABS: "abs({0})",
    Op.MULTIPLY_ADD: "{0} * {1} + {2}",
    Op.WHERE: "{1} if {0} != ZERO else {2}",
}

# fast_math="auto" or True (backends/gpu/fastmath.py): the MUFU forms, term by term as the
# accurate ones above, for the instructions fastmath.chosen_fast_ops picks. Intrinsics of ptx_sm90.py (only
# the sm_90a fragment epilogue uses them; the simulator never does).
def _gelu_fast():
    """x * Phi(x) around one ex2.approx (gpu/gelu.py, FAST): Phi(-|x|) = h =
    2^(-t^2 log2 e + E(min(t, GELU_T))) with t = |x| / sqrt(2); h appears twice and the
    intrinsic is pure, so LLVM computes it once."""
    t = "(abs({0}) * SQRT_HALF)"
    e = f"GELU_E{len(FAST) - 1}"
    for i in range(len(FAST) - 2, -1, -1):
        e = f"({e} * min({t}, GELU_T) + GELU_E{i})"
    h = f"ex2_approx(NEG_LOG2E * {t} * {t} + {e})"
    return f"{{0}} * ({h} if {{0}} < ZERO else ONE - {h})"


FAST_SPELLING = {
    Op.GELU: _gelu_fast(),
    Op.TANH: "tanh_approx({0})",
    Op.EXP: "exp_approx({0})",
    Op.LOG: "log_approx({0})",          # fast_math=True only (fastmath.APPROX_OPS)
    Op.SIGMOID: "rcp_approx(ONE + exp_approx(-{0}))",
    Op.SILU: "{0} * rcp_approx(ONE + exp_approx(-{0}))",
    Op.GELU_TANH: "HALF * {0} * (ONE + tanh_approx(GELU_K * ({0} + GELU_A * {0} * {0} * {0})))",
    # (the tanh appears twice; the asm is pure, so LLVM computes it once)
    Op.GELU_TANH_GRAD: ("HALF * (ONE + tanh_approx(GELU_K * ({0} + GELU_A * {0} * {0} * {0}))) + HALF * {0} * "
                        "(ONE - tanh_approx(GELU_K * ({0} + GELU_A * {0} * {0} * {0})) * "
                        "tanh_approx(GELU_K * ({0} + GELU_A * {0} * {0} * {0}))) * GELU_K * "
                        "(ONE + float32(3.0) * GELU_A * {0} * {0})"),
}

# float32 constants every kernel defines at module level (numba freezes globals as constants).
PRELUDE = """\
ONE = float32(1.0)
ZERO = float32(0.0)
HALF = float32(0.5)
GELU_K = float32(0.7978845608028654)   # sqrt(2/pi), rounded to fp32 as ops.py does
GELU_A = float32(0.044715)
SQRT_HALF = float32(0.7071067811865476)
ZERO4 = (ZERO, ZERO, ZERO, ZERO)   # an mma accumulator fragment
NEG_INF = float32(float("-inf"))   # identity of AMAX (and of AMIN, carried negated)
""" + f"""NEG_LOG2E = float32({-LOG2E!r})
GELU_T = float32({GELU_T!r})
""" + "".join(f"GELU_E{i} = float32({c!r})\n" for i, c in enumerate(FAST))


def spell(op, operands, fast=False):
    """The fp32 expression for `op` applied to operand variable names, parenthesised (`fast`:
    FAST_SPELLING where it has an entry)."""
    try:
        template = FAST_SPELLING[op] if fast and op in FAST_SPELLING else SPELLING[op]
    except KeyError:
        raise UnsupportedError(f"numba_cuda has no spelling for op {op.value!r}; it is not an "
                               "elementwise op the lowered Program can contain") from None
    return "(" + template.format(*operands) + ")"
