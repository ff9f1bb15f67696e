"""Epilogue operations, for use inside a traced function: `from evt_core import ops`.

Each builds one tree node; its semantics is the entry of the same name in
evt_core.tree.ops (one table for everything). Reductions name the problem axes they REMOVE:
"L", "M", "N" or a tuple of them, in any order.
"""
import numbers

from .errors import TraceError
from .tree.ops import AXES, Op
from .tree.trace import apply

__all__ = ["relu", "gelu", "gelu_tanh", "gelu_tanh_grad", "gelu_grad", "sigmoid", "silu", "tanh", "exp", "log", "sqrt",
           "rsqrt", "abs", "erf", "maximum", "minimum", "multiply_add", "where", "permute", "reshape",
           "sum", "amax", "amin", "mean"]


def relu(x): """max(x, 0)"""; return apply(Op.RELU, x)
def gelu(x): """x * Phi(x), the erf form"""; return apply(Op.GELU, x)
def gelu_tanh(x): """the tanh approximation of GELU"""; return apply(Op.GELU_TANH, x)
def gelu_tanh_grad(x): """d gelu_tanh(x) / dx (the DGELU of backward passes)"""; return apply(Op.GELU_TANH_GRAD, x)
def gelu_grad(x): """d gelu(x) / dx, the erf form: Phi(x) + x * phi(x)"""; return apply(Op.GELU_GRAD, x)
def sigmoid(x): """1 / (1 + exp(-x))"""; return apply(Op.SIGMOID, x)
def silu(x): """x * sigmoid(x)"""; return apply(Op.SILU, x)
def tanh(x): """hyperbolic tangent"""; return apply(Op.TANH, x)
def exp(x): """e ** x"""; return apply(Op.EXP, x)
def log(x): """natural logarithm"""; return apply(Op.LOG, x)
def sqrt(x): """square root"""; return apply(Op.SQRT, x)
def rsqrt(x): """1 / sqrt(x)"""; return apply(Op.RSQRT, x)
def abs(x): """|x|"""; return apply(Op.ABS, x)  # noqa: A001 - the op's name
def erf(x): """the error function (a hand-written erf-form GELU, 0.5 x (1 + erf(x / sqrt 2)), uses it)"""; return apply(Op.ERF, x)
def maximum(a, b): """elementwise max; NaN propagates"""; return apply(Op.MAXIMUM, a, b)
def minimum(a, b): """elementwise min; NaN propagates"""; return apply(Op.MINIMUM, a, b)
def multiply_add(a, b, c): """a * b + c"""; return apply(Op.MULTIPLY_ADD, a, b, c)
def where(cond, a, b): """a where cond != 0, else b"""; return apply(Op.WHERE, cond, a, b)


def permute(x, dims):
    """Transpose the value's dims (NumPy's transpose). Folded into load/store strides."""
    return apply(Op.PERMUTE, x, arg=_ints(dims, "permute", "dims", "(1, 0)"))


def reshape(x, shape):
    """NumPy reshape (one -1 allowed). A tree with literal extents is specialised on them."""
    return apply(Op.RESHAPE, x, arg=_ints(shape, "reshape", "shape", "(M, -1)"))


def _ints(values, op, what, example):
    """A tuple of Python ints from a sequence of integers, or TraceError naming the op."""
    if isinstance(values, (tuple, list)) and all(isinstance(v, numbers.Integral) and not isinstance(v, bool)
                                                 for v in values):
        return tuple(int(v) for v in values)
    raise TraceError(f"ops.{op}(x, {what}={values!r}): {what} must be a tuple of ints, e.g. {example}")


def _axes(over, name):
    """The frozenset of axes `over` names, or TraceError (any non-string, non-iterable value
    included: over=0 must not surface as Python's 'int' object is not iterable)."""
    if over is None:
        raise TraceError(f"ops.{name}(x) needs over=, the problem axes the reduction removes: over='M' "
                         "reduces the columns (one value per n), over='N' the rows, over=('M', 'N') both")
    if isinstance(over, str):
        items = (over,)
    elif isinstance(over, (tuple, list, set, frozenset)):
        items = tuple(over)
    else:
        items = ()
    if not items or any(not isinstance(a, str) or a not in AXES for a in items):
        raise TraceError(f"ops.{name}(..., over={over!r}): over must be 'L', 'M', 'N' or a tuple of them "
                         "(the axes the reduction removes, by name; numeric axes are not accepted because axis 0 is L "
                         "or M depending on the rank)")
    return frozenset(items)


def sum(x, over=None):  # noqa: A001 - the op's name
    """Sum over the named axes, in fp32."""
    return apply(Op.SUM, x, arg=_axes(over, "sum"))


def amax(x, over=None):
    """Max over the named axes; NaN propagates."""
    return apply(Op.AMAX, x, arg=_axes(over, "amax"))


def amin(x, over=None):
    """Min over the named axes; NaN propagates."""
    return apply(Op.AMIN, x, arg=_axes(over, "amin"))


def mean(x, over=None):
    """Mean over the named axes: the fp32 sum divided by the number of reduced elements."""
    return apply(Op.MEAN, x, arg=_axes(over, "mean"))


class UnknownOpError(TraceError, AttributeError):
    """`ops.<name>` for a name that is not an epilogue op."""


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)
    raise UnknownOpError(f"unknown op ops.{name}; epilogue ops are: {', '.join(__all__)}")
