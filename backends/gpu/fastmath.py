"""Which instructions a GPU backend may spell with the hardware's approximate transcendentals
(MUFU: tanh.approx, ex2.approx, rcp.approx, lg2.approx; for the erf-form GELU a polynomial
around one ex2.approx), one rule for both backends: the
backend option fast_math, "auto" (the default), True or False (chosen_fast_ops).

Under "auto" an approximation is taken only where every value it feeds, directly or through
later uses, ends in a 16-bit store: no fp32 output and no reduction sees it, so its error (about
2^-11 relative for tanh.approx, ex2.approx a few fp32 ulp) stays at or below the stored value's
own rounding. Each backend spells APPROX_OPS in its own language, term by term as the op
table's NumPy definition."""
from evt_core.tree.ops import REDUCTIONS, Op

FAST_OPS = frozenset({Op.TANH, Op.EXP, Op.SIGMOID, Op.SILU, Op.GELU, Op.GELU_TANH, Op.GELU_TANH_GRAD})
# fast_math=True, opt-in: every instruction with a MUFU spelling wherever its values go, LOG's
# lg2.approx included. Its error is absolute (about 2^-22), so relative error grows without
# bound near log(1) = 0: "auto" never takes it, even for 16-bit stores. These are the
# approximations Triton, so torch.compile's generated kernels, use by default.
APPROX_OPS = FAST_OPS | {Op.LOG}


# The erf-form GELU, x * Phi(x), with one ex2.approx and no erff (erff is ~24 instructions, a
# third of them selects between its two polynomials; BERT's FFN epilogue is bound by them).
# With t = |x| / sqrt(2), Phi(-|x|) = erfc(t) / 2 = 2^(-t^2 log2(e) + E(t)), where
# E(t) = log2(erfcx(t) / 2) is smooth and slowly varying; E is a degree-6 polynomial in
# min(t, GELU_T) (weighted minimax fit on [0, 3.75], max fit error 2.8e-5 in log2 units), and
# Phi(x) = h for x < 0, 1 - h otherwise. Evaluated in fp32 (tests/gpu_layer/test_fastmath.py
# emulates it): gelu's relative error stays under 2.2e-5 wherever |gelu(x)| is an fp16 normal
# or subnormal (x > -5.3), Phi's absolute error under 1e-5. Stored in fp16, 0.7 % of the inputs
# round differently from the exactly rounded value (erff's spelling: 7 %, from 1 + erf's
# cancellation for x < 0), at most 2 fp16 ulp for both. Its absolute error is too large for
# fp32 results, so only fast_math="auto"'s 16-bit rule (or fast_math=True) takes it.
GELU_T = 3.75
GELU_E = (-1.0000277757644653, -1.6273488998413086, 0.5226460099220276, -0.14775535464286804,
          0.030378548428416252, -0.003847773652523756, 0.00021957351418677717)
LOG2E = 1.4426950408889634
SQRT_HALF = 0.7071067811865476


def gelu_fast_reference(x):
    """NumPy float32 emulation of the fast GELU spelling, operation by operation as both
    backends spell it (2^x in float64 stands for ex2.approx's ~2^-22 relative error)."""
    import numpy as np
    f = np.float32
    x = np.asarray(x, np.float32)
    t = (np.abs(x) * f(SQRT_HALF)).astype(np.float32)
    tc = np.minimum(t, f(GELU_T))
    e = np.full_like(tc, f(GELU_E[-1]))
    for c in GELU_E[-2::-1]:
        e = (e * tc + f(c)).astype(np.float32)
    e = (f(-LOG2E) * (t * t).astype(np.float32) + e).astype(np.float32)
    h = np.exp2(e.astype(np.float64)).astype(np.float32)
    phi = np.where(x < 0, h, (f(1) - h).astype(np.float32))
    with np.errstate(invalid="ignore"):                 # -inf * 0 is NaN, as x * Phi(x) in fp32
        return (x * phi).astype(np.float32)


def chosen_fast_ops(program, fast_math):
    """Indices of the instructions spelled with MUFU approximations under the option fast_math:
    "auto" (fast_ops), True (every APPROX_OPS instruction) or False (none)."""
    if fast_math is True:
        return tuple(i for i, ins in enumerate(program.instrs) if ins.op in APPROX_OPS)
    return fast_ops(program) if fast_math == "auto" else ()


def fast_ops(program):
    """Indices of the instructions in FAST_OPS whose values reach only 16-bit stores."""
    n = len(program.instrs)
    users = [[] for _ in range(n)]
    for i, ins in enumerate(program.instrs):
        for a in ins.args:
            users[a].append(i)
    only16 = [True] * n
    for i in reversed(range(n)):
        ins = program.instrs[i]
        if ins.op is Op.STORE:
            here = program.outputs[ins.arg].dtype != "float32"
        else:
            here = ins.op not in REDUCTIONS
        only16[i] = here and all(only16[u] for u in users[i])
    return tuple(i for i, ins in enumerate(program.instrs) if only16[i] and ins.op in FAST_OPS)
