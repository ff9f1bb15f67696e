"""Which instructions a GPU backend may spell with the hardware's approximate transcendentals
(MUFU: tanh.approx, ex2.approx, rcp.approx, lg2.approx; for the erf-form GELU gelu.FAST, a
polynomial around one ex2.approx), one rule for both backends: the backend option fast_math, "auto" (the default), True or False (chosen_fast_ops).

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
