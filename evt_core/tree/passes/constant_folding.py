"""Constant folding.

Invariant established: no elementwise node has only CONST operands (it is evaluated once, in
fp32, by the op's own table entry, so folding cannot change a result), and `x * 1`, `1 * x`,
`x / 1` are x. Additive identities are left alone: x + 0 turns -0.0 into +0.0.
"""
import numpy as np

from ..ops import ELEMENTWISE, Op
from .rewrite import rewrite


def fold_constants(tree):
    def fold(node):
        if node.op not in ELEMENTWISE:
            return node
        if all(s.op is Op.CONST for s in node.src):
            args = [np.float32(s.arg) for s in node.src]
            value = float(ELEMENTWISE[node.op].fn(*args))
            return node.replace(op=Op.CONST, src=(), arg=value, shape=())
        if node.op in (Op.MUL, Op.DIV):
            a, b = node.src
            if _is_one(b) and a.shape == node.shape:
                return a
            if node.op is Op.MUL and _is_one(a) and b.shape == node.shape:
                return b
        return node
    return rewrite(tree, fold)


def _is_one(n):
    return n.op is Op.CONST and n.arg == 1.0
