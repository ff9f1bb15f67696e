"""What to say when NumPy meets a traced value: `np.sum(x)` and friends get the epilogue
spelling of the same operation (checked against the real op list, so a hint never names an op
that does not exist), and the operator ufuncs a NumPy scalar on the left of `*` dispatches to
are mapped back to the operator."""
from .ops import Op

# NumPy names -> the epilogue spelling of the same operation (None: there is none)
_NUMPY_EQUIVALENT = {
    "add": "+", "subtract": "-", "multiply": "*", "divide": "/", "true_divide": "/", "negative": "unary -",
    "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">=", "absolute": "ops.abs",
    "fabs": "ops.abs", "power": "** (exponents 1, 2, 0.5, -0.5, -1)", "square": "x * x",
    "reciprocal": "1.0 / x", "fmax": "ops.maximum", "fmin": "ops.minimum",
    "clip": "ops.minimum(ops.maximum(x, lo), hi)", "where": "ops.where(cond, a, b)",
    "sum": "ops.sum(x, over=...)", "mean": "ops.mean(x, over=...)", "max": "ops.amax(x, over=...)",
    "amax": "ops.amax(x, over=...)", "min": "ops.amin(x, over=...)", "amin": "ops.amin(x, over=...)",
    "transpose": "ops.permute(x, dims)", "reshape": "ops.reshape(x, shape)", "matmul": None, "dot": None,
}
OPERATOR_UFUNCS = {"add": Op.ADD, "subtract": Op.SUB, "multiply": Op.MUL, "true_divide": Op.DIV,
                    "divide": Op.DIV, "less": Op.LT, "less_equal": Op.LE, "greater": Op.GT,
                    "greater_equal": Op.GE}
_REDUCE_METHOD = {"add": "ops.sum(x, over=...)", "maximum": "ops.amax(x, over=...)",
                  "minimum": "ops.amin(x, over=...)"}


def numpy_hint(name, method="__call__"):
    """The message for a NumPy function applied to a traced value: the op to use instead, or
    the list of ops when NumPy's function has no epilogue counterpart (never a made-up name)."""
    from .. import ops
    if method == "reduce" and name in _REDUCE_METHOD:
        use = _REDUCE_METHOD[name]
    elif method != "__call__":
        use = None
    elif name in _NUMPY_EQUIVALENT:
        use = _NUMPY_EQUIVALENT[name]
    else:
        use = f"ops.{name}" if name in ops.__all__ else None
    shown = f"np.{name}" if method == "__call__" else f"np.{name}.{method}"
    if use is None:
        return (f"{shown} was called on a traced value and has no epilogue equivalent; epilogue values "
                f"support + - * / < <= > >= and the ops {', '.join(ops.__all__)}")
    return f"{shown} was called on a traced value; inside an epilogue use {use} instead"
