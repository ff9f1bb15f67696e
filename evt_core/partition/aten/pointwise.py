"""Elementwise ATen ops: one record each (kind, signature, shape rule, NumPy, tree node).

NumPy operands arrive as float32 (or int/bool) arrays; tree operands as traced evt_core values
or Python floats. GELU and erf use evt_core's own definitions (evt_core.tree.ops), so the
graph level and the epilogue tree compute the same function."""
from __future__ import annotations

import numpy as np

from evt_core import ops as E
from evt_core.tree.ops import ELEMENTWISE, Op, erf as _erf64

from .. import shapes as S
from .record import Kind, Unfusible, op

_E = Kind.ELEMENTWISE
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_FORMS = ("none", "tanh")


def erf(x):
    """The tree's erf (float64 math.erf), rounded to float32 like every tree op."""
    return _erf64(np.asarray(x, np.float64)).astype(np.float32)


def _gelu_infer(t, a):
    S.check(a["approximate"] in _GELU_FORMS, "attribute", f"gelu approximate={a['approximate']!r}; "
            f"use one of {list(_GELU_FORMS)}")
    return S.same(t, a)


def _gelu_backward_infer(t, a):
    _gelu_infer({"self": t["self"]}, a)
    return S.elementwise(t, a)


def gelu(self, approximate="none"):
    return ELEMENTWISE[Op.GELU_TANH if approximate == "tanh" else Op.GELU].fn(self)


def gelu_backward(grad_output, self, approximate="none"):
    grad = ELEMENTWISE[Op.GELU_TANH_GRAD if approximate == "tanh" else Op.GELU_GRAD].fn
    return grad_output * grad(np.asarray(self, np.float32))


def _gelu_backward_tree(node, a, ctx):
    grad = E.gelu_tanh_grad if node.attr("approximate") == "tanh" else E.gelu_grad
    return a[0] * grad(a[1])


_UNARY = {   # name: (NumPy, tree; a str says why there is no tree node)
    "neg": (lambda self: -self, lambda n, a, c: -a[0]),
    "relu": (lambda self: np.maximum(self, 0), lambda n, a, c: E.relu(a[0])),
    "tanh": (np.tanh, lambda n, a, c: E.tanh(a[0])),
    "sigmoid": (lambda self: 1 / (1 + np.exp(-self)), lambda n, a, c: E.sigmoid(a[0])),
    "exp": (np.exp, lambda n, a, c: E.exp(a[0])),
    "log": (np.log, lambda n, a, c: E.log(a[0])),
    "rsqrt": (lambda self: 1 / np.sqrt(self), lambda n, a, c: E.rsqrt(a[0])),
    "sqrt": (np.sqrt, lambda n, a, c: E.sqrt(a[0])),
    "abs": (np.abs, lambda n, a, c: E.abs(a[0])),
    "reciprocal": (lambda self: 1 / self, lambda n, a, c: 1.0 / a[0]),
    "clone": (lambda self: np.array(self, copy=True), lambda n, a, c: a[0]),
    "silu": (lambda self: self / (1 + np.exp(-self)), lambda n, a, c: E.silu(a[0])),
    "erf": (erf, lambda n, a, c: E.erf(a[0])),
    "logical_not": (np.logical_not, "boolean values are not epilogue values"),
}
for _name, (_np, _tree) in _UNARY.items():
    op(_name, _E, "self", S.same, (lambda f: lambda self: f(self))(_np), _tree)

def _pow_tree(a):
    """x ** k for a constant k of 1, 2 or 3 as products (a loss's square); other powers have no
    tree form."""
    x, k = a
    if isinstance(k, (int, float)) and k in (1, 2, 3):
        out = x
        for _ in range(int(k) - 1):
            out = out * x
        return out
    raise Unfusible(f"pow with exponent {k!r}: only constant exponents 1, 2 and 3 have tree forms "
                    "(as products); rewrite other powers")


_BINARY = {
    "add": (np.add, lambda n, a, c: a[0] + a[1]),
    "sub": (np.subtract, lambda n, a, c: a[0] - a[1]),
    "mul": (np.multiply, lambda n, a, c: a[0] * a[1]),
    "div": (np.divide, lambda n, a, c: a[0] / a[1]),
    "maximum": (np.maximum, lambda n, a, c: E.maximum(a[0], a[1])),
    "minimum": (np.minimum, lambda n, a, c: E.minimum(a[0], a[1])),
    "rsub": (lambda x, y: y - x, lambda n, a, c: a[1] - a[0]),
    "pow": (np.power, lambda n, a, c: _pow_tree(a)),
}
_COMPARE = {
    "eq": (np.equal, "equality has no epilogue op"),
    "ne": (np.not_equal, "inequality has no epilogue op"),
    "ge": (np.greater_equal, lambda n, a, c: a[0] >= a[1]),
    "gt": (np.greater, lambda n, a, c: a[0] > a[1]),
    "le": (np.less_equal, lambda n, a, c: a[0] <= a[1]),
    "lt": (np.less, lambda n, a, c: a[0] < a[1]),
}
for _table, _rule in ((_BINARY, S.elementwise), (_COMPARE, S.compare)):
    for _name, (_np, _tree) in _table.items():
        op(_name, _E, "self other", _rule, (lambda f: lambda self, other: f(self, other))(_np), _tree)

op("gelu", _E, "self approximate:", _gelu_infer, gelu,
   lambda n, a, c: E.gelu_tanh(a[0]) if n.attr("approximate") == "tanh" else E.gelu(a[0]),
   defaults={"approximate": "none"})
op("gelu_backward", _E, "grad_output self approximate:", _gelu_backward_infer, gelu_backward,
   _gelu_backward_tree, defaults={"approximate": "none"})
op("where", _E, "condition self other", S.where,
   lambda condition, self, other: np.where(condition, self, other),
   lambda n, a, c: E.where(a[0], a[1], a[2]))
op("threshold_backward", _E, "grad_output self threshold:", S.elementwise,
   lambda grad_output, self, threshold=0.0: np.where(self <= threshold, 0, grad_output),
   lambda n, a, c: E.where(a[1] > float(n.attr("threshold")), a[0], 0.0),
   defaults={"threshold": 0.0})
op("tanh_backward", _E, "grad_output output", S.elementwise,
   lambda grad_output, output: grad_output * (1 - output * output),
   lambda n, a, c: a[0] * (1.0 - a[1] * a[1]))
op("sigmoid_backward", _E, "grad_output output", S.elementwise,
   lambda grad_output, output: grad_output * output * (1 - output),
   lambda n, a, c: a[0] * a[1] * (1.0 - a[1]))


def _to_copy_tree(node, a, ctx):
    if node.dtype not in ("float16", "float32", "bfloat16"):
        raise Unfusible(f"{node.name}: a cast to {node.dtype} has no epilogue form")
    return a[0]          # the epilogue computes in fp32; rounding happens at the store


op("_to_copy", _E, "self dtype:", S.to_dtype,
   lambda self, dtype: self.astype(np.float32 if dtype == "bfloat16" else dtype), _to_copy_tree,
   aliases=("to",))
