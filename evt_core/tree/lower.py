"""Lowering: a tree (after the pipeline) becomes the straight-line Program backends compile.

TOPO bodies are inlined with their ARG placeholders bound to the operands' SSA values; a STORE
emits a store and stands for its input (a store returns what it stores); a STORE of a
reduction becomes one REDUCE instruction targeting that output.
"""
from ..errors import UnsupportedError
from ..program import Instr, Program, Reduction
from .ir import describe
from .ops import ELEMENTWISE, LAYOUT, Op, REDUCTIONS
from .passes.rewrite import drive


def lower(tree):
    instrs, inputs, scalars, outputs, reductions = [], [], [], [], []

    def emit(ins):
        instrs.append(ins)
        return len(instrs) - 1

    def index(seq, item):
        if item not in seq:
            seq.append(item)
        return seq.index(item)

    def visit(n, memo, args):              # a recursive generator: drive runs it without recursion
        if n in memo:
            return memo[n]
        if n.op is Op.ARG:
            return args[n.arg]
        if n.op is Op.TOPO:
            bound = []
            for s in n.src:
                bound.append((yield visit(s, memo, args)))
            out = yield visit(n.arg, {}, tuple(bound))
        elif n.op is Op.SINK:
            for s in n.src:
                yield visit(s, memo, args)
            out = None
        elif n.op is Op.STORE and n.src[0].op in REDUCTIONS:
            red = n.src[0]
            x = yield visit(red.src[0], memo, args)
            out = emit(Instr(red.op, (x,), index(reductions, Reduction(n.arg, red.op, red.arg))))
        elif n.op is Op.STORE:
            out = yield visit(n.src[0], memo, args)
            emit(Instr(Op.STORE, (out,), index(outputs, n.arg)))
        elif n.op is Op.ACCUM:
            out = emit(Instr(Op.ACCUM))
        elif n.op is Op.LOAD:
            out = emit(Instr(Op.LOAD, (), index(inputs, n.arg)))
        elif n.op is Op.SCALAR:
            out = emit(Instr(Op.SCALAR, (), index(scalars, n.arg)))
        elif n.op is Op.CONST:
            out = emit(Instr(Op.CONST, (), float(n.arg)))
        elif n.op in ELEMENTWISE:
            src = []
            for s in n.src:
                src.append((yield visit(s, memo, args)))
            out = emit(Instr(n.op, tuple(src)))
        elif n.op in LAYOUT:
            raise UnsupportedError(f"{describe(n)} reached lowering; run the layout-elimination pass first", n)
        else:
            raise UnsupportedError(f"{describe(n)}: {n.op.value} cannot be lowered here; "
                                   "reductions must be returned directly as outputs", n)
        memo[n] = out
        return out

    memo = {}
    for r in tree.roots:
        drive(visit(r, memo, ()))
    return Program(batched=tree.batched, inputs=tuple(inputs), scalars=tuple(scalars), outputs=tuple(outputs),
                   reductions=tuple(reductions), instrs=tuple(instrs), params=tuple(tree.params),
                   problem=tuple(tree.problem), specialised=tree.specialised,
                   result_names=tuple(tree.result_names))
