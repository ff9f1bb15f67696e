"""Hand-built Programs: a tiny builder plus the representative set the CPU compile checks and
the GPU tests share (every op, node kind, dtype and layout class appears at least once).

The builder exists so backend tests do not depend on the tracer; it emits exactly what the
lowering would (straight-line SSA, operands with dims over "L", "M", "N").
"""
from evt_core.program import Instr, Operand, Program, Reduction
from evt_core.tree.ops import ELEMENTWISE, Op


class ProgramBuilder:
    def __init__(self, batched=False):
        self.batched = batched
        self.instrs, self.inputs, self.scalars, self.outputs, self.reductions = [], [], [], [], []
        self.accum = self._add(Instr(Op.ACCUM))

    def _add(self, ins):
        self.instrs.append(ins)
        return len(self.instrs) - 1

    def _dims(self, dims):
        return tuple(dims) if self.batched or "L" not in dims else tuple(d for d in dims if d != "L")

    def load(self, name, dtype, dims):
        self.inputs.append(Operand(name, dtype, self._dims(dims)))
        return self._add(Instr(Op.LOAD, (), len(self.inputs) - 1))

    def scalar(self, name):
        self.scalars.append(name)
        return self._add(Instr(Op.SCALAR, (), len(self.scalars) - 1))

    def const(self, value):
        return self._add(Instr(Op.CONST, (), float(value)))

    def op(self, op, *args):
        assert ELEMENTWISE[op].arity == len(args), op
        return self._add(Instr(op, tuple(args)))

    def store(self, x, name, dtype, dims=("L", "M", "N"), order=()):
        self.outputs.append(Operand(name, dtype, self._dims(dims), order=order))
        return self._add(Instr(Op.STORE, (x,), len(self.outputs) - 1))

    def reduce(self, op, x, name, dtype, over):
        keep = tuple(ax for ax in ("L", "M", "N") if ax not in over and (self.batched or ax != "L"))
        self.reductions.append(Reduction(Operand(name, dtype, keep), op, frozenset(over)))
        return self._add(Instr(op, (x,), len(self.reductions) - 1))

    def build(self):
        names = ([o.name for o in self.outputs] + [r.name for r in self.reductions])
        params = ("accum",) + tuple(o.name for o in self.inputs) + tuple(self.scalars)
        return Program(self.batched, tuple(self.inputs), tuple(self.scalars), tuple(self.outputs),
                       tuple(self.reductions), tuple(self.instrs), params=params, result_names=tuple(names))


def bias_gelu(dtype="float16", batched=False, gelu=Op.GELU):
    """D = gelu(accum + bias[n]): the benchmark epilogue."""
    b = ProgramBuilder(batched)
    bias = b.load("bias", dtype, ("N",))
    b.store(b.op(gelu, b.op(Op.ADD, b.accum, bias)), "D", dtype)
    return b.build()


def identity(dtype="float16", batched=False):
    b = ProgramBuilder(batched)
    b.store(b.accum, "D", dtype)
    return b.build()


def paper_example(dtype="float16", batched=False):
    """The EVT paper's example: F = alpha*accum + C; D = relu(F + bias) + 1; colmax of F."""
    b = ProgramBuilder(batched)
    C = b.load("C", dtype, ("L", "M", "N"))
    alpha = b.scalar("alpha")
    bias = b.load("bias", dtype, ("N",))
    F = b.op(Op.ADD, b.op(Op.MUL, alpha, b.accum), C)
    b.store(b.op(Op.ADD, b.op(Op.RELU, b.op(Op.ADD, F, bias)), b.const(1.0)), "D", dtype)
    b.store(F, "F", dtype)
    b.reduce(Op.AMAX, F, "F_colmax", "float32", {"M"} | ({"L"} if batched else set()))
    return b.build()


def all_unary(dtype="float32"):
    """Every unary op once, summed so none is dead, plus every binary/ternary op."""
    b = ProgramBuilder()
    x = b.op(Op.MUL, b.accum, b.const(0.01))
    terms = [b.op(op, x) for op in (Op.NEG, Op.RELU, Op.GELU, Op.GELU_TANH, Op.GELU_TANH_GRAD, Op.GELU_GRAD,
                                    Op.SIGMOID, Op.SILU, Op.TANH, Op.EXP, Op.ABS)]
    pos = b.op(Op.ADD, b.op(Op.ABS, x), b.const(1.0))
    terms += [b.op(op, pos) for op in (Op.LOG, Op.SQRT, Op.RSQRT)]
    y = b.load("Y", dtype, ("M", "N"))
    terms += [b.op(op, x, y) for op in (Op.SUB, Op.DIV, Op.LT, Op.LE, Op.GT, Op.GE, Op.MAXIMUM, Op.MINIMUM)]
    terms.append(b.op(Op.MULTIPLY_ADD, x, y, pos))
    terms.append(b.op(Op.WHERE, b.op(Op.GT, x, b.const(0.0)), x, y))
    acc = terms[0]
    for t in terms[1:]:
        acc = b.op(Op.ADD, acc, t)
    b.store(acc, "D", dtype)
    return b.build()


def reductions(dtype="float16", batched=True, red_dtype="float32"):
    """Every reduction op over every axis class, plus a broadcast column load and a row output."""
    b = ProgramBuilder(batched)
    col = b.load("scale", dtype, ("M",))
    v = b.op(Op.MUL, b.accum, col)
    b.store(v, "D", dtype)
    b.reduce(Op.SUM, v, "row_sum", red_dtype, {"N"})
    b.reduce(Op.MEAN, v, "col_mean", red_dtype, {"M"})
    b.reduce(Op.AMAX, v, "amax_all", red_dtype, {"L", "M", "N"} if batched else {"M", "N"})
    b.reduce(Op.AMIN, v, "row_min", red_dtype, {"N"})
    if batched:
        b.reduce(Op.SUM, v, "batch_sum", red_dtype, {"L"})
    return b.build()


def aux_layouts(dtype="float16"):
    """Loads and stores of every layout class: full, row vector, column vector, scalar tensor;
    a column-major output."""
    b = ProgramBuilder()
    C = b.load("C", dtype, ("M", "N"))
    rowv = b.load("rowv", "float32", ("N",))
    colv = b.load("colv", "bfloat16", ("M",))
    x = b.op(Op.MULTIPLY_ADD, b.accum, colv, b.op(Op.ADD, C, rowv))
    b.store(x, "D", dtype)
    b.store(x, "Dt", "float32", order=(1, 0))
    b.store(rowv, "rowv_copy", "float32", dims=("N",))
    return b.build()


REPRESENTATIVE = {
    "identity_f16": lambda: identity("float16"),
    "bias_gelu_f16": lambda: bias_gelu("float16"),
    "bias_gelu_bf16_batched": lambda: bias_gelu("bfloat16", batched=True, gelu=Op.GELU_TANH),
    "paper_f16": lambda: paper_example("float16"),
    "all_ops_f32": lambda: all_unary("float32"),
    "reductions_f16_batched": lambda: reductions("float16", batched=True),
    "reductions_bf16_out": lambda: reductions("bfloat16", batched=False, red_dtype="bfloat16"),
    "aux_layouts_f16": lambda: aux_layouts("float16"),
}


# ---- the benchmark workloads (bench/workloads.py W1-W4), for compile checks of the fast paths ----
def w1_forward(dtype="float16", batched=False):
    """W1: z = accum + bias[n]; store z and gelu_tanh(z) (two 16-bit M x N outputs)."""
    b = ProgramBuilder(batched)
    bias = b.load("bias", dtype, ("N",))
    z = b.op(Op.ADD, b.accum, bias)
    b.store(z, "z", dtype)
    b.store(b.op(Op.GELU_TANH, z), "act", dtype)
    return b.build()


def w2_backward(dtype="float16", batched=False, grad=Op.GELU_TANH_GRAD):
    """W2: dx = accum * gelu_tanh_grad(z), z an M x N aux input; store dx and its column sums.
    grad=Op.GELU_GRAD: the erf form's derivative (BERT's GELU backward)."""
    b = ProgramBuilder(batched)
    z = b.load("z", dtype, ("L", "M", "N"))
    dx = b.op(Op.MUL, b.accum, b.op(grad, z))
    b.store(dx, "dx", dtype)
    b.reduce(Op.SUM, dx, "dbias", "float32", {"M"} | ({"L"} if batched else set()))
    return b.build()


def w3_softmax_stats(dtype="float16", batched=False):
    """W3: s = 0.125 * accum; store s and its row max."""
    b = ProgramBuilder(batched)
    s = b.op(Op.MUL, b.const(0.125), b.accum)
    b.store(s, "s", dtype)
    b.reduce(Op.AMAX, s, "s_rowmax", "float32", {"N"})
    return b.build()


def w4_layernorm_stats(dtype="float16", batched=False):
    """W4: y = accum + bias[n] + r, r an M x N aux input; store y, row sums of y and y*y."""
    b = ProgramBuilder(batched)
    bias = b.load("bias", dtype, ("N",))
    r = b.load("r", dtype, ("L", "M", "N"))
    y = b.op(Op.ADD, b.op(Op.ADD, b.accum, bias), r)
    b.store(y, "y", dtype)
    b.reduce(Op.SUM, y, "y_sum", "float32", {"N"})
    b.reduce(Op.SUM, b.op(Op.MUL, y, y), "y_sqsum", "float32", {"N"})
    return b.build()


WORKLOADS = {"W1": w1_forward, "W2": w2_backward, "W3": w3_softmax_stats, "W4": w4_layernorm_stats}
