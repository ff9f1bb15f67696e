"""Which instructions a GPU backend may spell with the hardware's approximate transcendentals
(MUFU: tanh.approx, ex2.approx, rcp.approx), one rule for both backends (fast_math="auto").

An approximation is taken only where every value it feeds, directly or through later uses, ends
in a 16-bit store: no fp32 output and no reduction sees it, so its error (about 2^-11 relative for
tanh.approx, ex2.approx a few fp32 ulp) stays at or below the stored value's own rounding. Each
backend spells FAST_OPS in its own language, term by term as the op table's NumPy definition."""
from evt_core.tree.ops import REDUCTIONS, Op

FAST_OPS = frozenset({Op.TANH, Op.EXP, Op.SIGMOID, Op.SILU, Op.GELU_TANH, Op.GELU_TANH_GRAD})


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
