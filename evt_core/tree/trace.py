"""The tracer: runs the user's epilogue function on proxy values and records the tree.

Tracing executes ordinary Python, so reassignment, helper functions, loops over constants and
lambdas all work; only the returned names need the source (for `return D, F`), and the dict form
(`return {"D": D}`) needs none, which is what REPL, lambda and generated functions use.
"""
import ast
import contextvars
import inspect
import math
import numbers
import textwrap

import numpy as np

from ..call import _real_kind, number_text
from ..dtypes import dtype_name, is_finite
from ..errors import EvtError, ShapeError, TraceError
from ..program import Operand
from .ir import Node, describe
from .numpy_hints import OPERATOR_UFUNCS, numpy_hint
from .ops import Op, REDUCTIONS
from .shapes import infer_shape

_problem = contextvars.ContextVar("evt_problem", default=None)
# parameter names a compiled kernel could not be called with
RESERVED = {"A": "kernel(A, B, ...) takes the GEMM operands under that name",
            "B": "kernel(A, B, ...) takes the GEMM operands under that name",
            "self": "it is the kernel object in kernel(A, B, ...)"}


class TensorSpec:
    """A fake example tensor: `TensorSpec(shape, dtype, strides=None)`, strides in ELEMENTS
    (default row-major)."""

    def __init__(self, shape, dtype, strides=None):
        self.shape = _spec_ints(shape, "shape", "TensorSpec", "(4, 6)")
        if any(e < 0 for e in self.shape):
            raise ShapeError(f"TensorSpec{self.shape}: extents must be non-negative")
        self.dtype = dtype_name(dtype, f"TensorSpec{self.shape}")
        if strides is None:
            strides, step = [], 1
            for e in reversed(self.shape):
                strides.insert(0, step)
                step *= max(e, 1)
        strides = _spec_ints(strides, "strides", f"TensorSpec{self.shape}", "(6, 1)")
        if len(strides) != len(self.shape):
            raise TraceError(f"TensorSpec{self.shape}: {len(strides)} strides given for {len(self.shape)} dims")
        self.element_strides = strides

    def __repr__(self):
        return f"TensorSpec({self.shape}, {self.dtype!r}, strides={self.element_strides})"


def _spec_ints(values, field, what, example):
    """A TensorSpec's shape or strides as a tuple of Python ints (NumPy integers included), as
    ops.reshape takes its shape; int() would truncate 4.7 to 4 silently and turn 'M' or None
    into a bare ValueError/TypeError."""
    if not isinstance(values, (tuple, list)):
        raise ShapeError(f"{what}: {field}={values!r} is not a tuple of ints (it is {type(values).__name__}); "
                         f"pass e.g. {field}={example}")
    for v in values:
        if not isinstance(v, numbers.Integral) or isinstance(v, bool):
            raise ShapeError(f"{what}: {field}={tuple(values)!r} holds {v!r} ({type(v).__name__}); every entry "
                             f"must be an int, e.g. {field}={example}")
    return tuple(int(v) for v in values)


class Value:
    """A traced value. Arithmetic builds nodes; Python control flow on it is a TraceError."""
    __slots__ = ("node",)
    __array_priority__ = 1000          # NumPy scalars defer to our reflected operators

    def __init__(self, node):
        self.node = node

    def __add__(self, o): return apply(Op.ADD, self, o)
    def __radd__(self, o): return apply(Op.ADD, o, self)
    def __sub__(self, o): return apply(Op.SUB, self, o)
    def __rsub__(self, o): return apply(Op.SUB, o, self)
    def __mul__(self, o): return apply(Op.MUL, self, o)
    def __rmul__(self, o): return apply(Op.MUL, o, self)
    def __truediv__(self, o): return apply(Op.DIV, self, o)
    def __rtruediv__(self, o): return apply(Op.DIV, o, self)
    def __neg__(self): return apply(Op.NEG, self)
    def __pos__(self): return self
    def __abs__(self): return apply(Op.ABS, self)
    def __lt__(self, o): return apply(Op.LT, self, o)
    def __le__(self, o): return apply(Op.LE, self, o)
    def __gt__(self, o): return apply(Op.GT, self, o)
    def __ge__(self, o): return apply(Op.GE, self, o)

    def __pow__(self, p):
        """x**2, x**0.5, x**-0.5 and x**1 have exact tree forms; other powers are refused."""
        forms = {1: lambda: self, 2: lambda: self * self, 0.5: lambda: apply(Op.SQRT, self),
                 -0.5: lambda: apply(Op.RSQRT, self), -1: lambda: 1.0 / self}
        if isinstance(p, numbers.Real) and not isinstance(p, bool) and p in forms:
            return forms[p]()
        raise TraceError(f"{describe(self.node)} ** {p!r}: only the exponents 1, 2, 0.5, -0.5 and -1 are "
                         "supported; write the product or use ops.exp(p * ops.log(x))")

    def __eq__(self, o):
        raise TraceError(f"`==` on traced value {describe(self.node)}: equality has no tree meaning; "
                         "use comparisons (<, <=, >, >=) with ops.where")

    __hash__ = object.__hash__

    def __bool__(self):
        raise TraceError(f"the truth value of traced value {describe(self.node)} is unknown at trace time; "
                         "use ops.where(cond, a, b) instead of if/and/or, and ops.maximum/ops.minimum "
                         "instead of max()/min()")

    def __float__(self):
        raise TraceError(f"float() of traced value {describe(self.node)}: it has no value at trace time "
                         "(math.* functions call float(); use evt_core.ops, e.g. ops.exp, ops.sqrt)")

    __int__ = __index__ = __complex__ = __float__

    def __getitem__(self, index):
        raise TraceError(f"indexing traced value {describe(self.node)}[{index!r}]: an epilogue computes every "
                         "element alike; use ops.permute/ops.reshape for layouts and ops.sum/amax/amin/mean "
                         "with over= to reduce")

    def __array_ufunc__(self, ufunc, method, *args, **kw):
        # `np.float32(2) * x` reaches here as np.multiply(np.float32(2), x): an operator with a
        # NumPy scalar on the left is the operator itself. Every other NumPy call gets a hint.
        op = OPERATOR_UFUNCS.get(ufunc.__name__)
        if op is not None and method == "__call__" and not kw and \
                all(isinstance(a, (Value, numbers.Real)) and not isinstance(a, (bool, np.bool_)) for a in args):
            return apply(op, *args)
        raise TraceError(numpy_hint(ufunc.__name__, method))

    def __array_function__(self, func, types, args, kwargs):
        raise TraceError(numpy_hint(func.__name__, "__call__"))

    def __repr__(self):
        return f"<traced {describe(self.node)} shape={self.node.shape}>"


def _node_of(x, op):
    if isinstance(x, Value):
        if x.node.op in REDUCTIONS:
            raise TraceError(f"the result of {describe(x.node)} is used in {op.value}; a reduction completes "
                             "only after every tile is done, so it can only be returned as an output")
        return x.node
    if isinstance(x, bool):
        return Node(Op.CONST, arg=float(x))
    if isinstance(x, numbers.Real):
        return Node(Op.CONST, arg=fp32_constant(x, f"a constant operand of {op.value}"))
    raise TraceError(f"operand of {op.value} has type {type(x).__name__}; epilogue values are traced "
                     "tensors, parameters or Python numbers")


def fp32_constant(x, what):
    """float(x) rounded to fp32 (constants compute in fp32), or TraceError when a finite x is
    beyond fp32's range: it would silently become inf."""
    try:
        with np.errstate(over="ignore"):
            v = float(np.float32(x))
        finite = is_finite(x)
    except OverflowError:           # an int or Fraction beyond even float64's range
        v, finite = math.inf, True
    if math.isinf(v) and finite:
        raise TraceError(f"{what}, {number_text(x)}, is beyond float32's range (+-3.4e38) and would become inf; "
                         "rescale it, or write float('inf') if inf is meant")
    return v


def apply(op, *operands, arg=None):
    """Build `op(*operands)`, inferring its shape; the one entry point for every traced op."""
    src = tuple(_node_of(x, op) for x in operands)
    problem = _problem.get()
    if problem is None:
        raise TraceError(f"ops.{op.value} was called outside evt_core.trace; epilogue functions run only "
                         "while being traced")
    return Value(Node(op, src, arg, infer_shape(op, src, arg, problem)))


def _example_of(name, x):
    """(shape, dtype name, element strides) of an example array-like or TensorSpec."""
    if isinstance(x, TensorSpec):
        return x.shape, x.dtype, x.element_strides
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise TraceError(f"example for {name!r} is a {type(x).__name__}; give an array, a TensorSpec, "
                         "or a Python float for a run-time scalar")
    shape = tuple(int(e) for e in x.shape)
    dt = dtype_name(str(x.dtype).replace("torch.", ""), f"example {name!r}")
    if callable(getattr(x, "stride", None)):          # torch: element strides
        strides = tuple(x.stride())
    elif getattr(x, "strides", None) is not None:     # NumPy, CuPy: byte strides
        item = np.dtype(x.dtype).itemsize
        strides = tuple(s // item for s in x.strides)
    else:       # a duck array (JAX, ...): its layout, which the tree is specialised on, is unknown
        raise TraceError(f"example for {name!r} is a {type(x).__name__} with a shape and dtype but no strides "
                         "(neither torch's .stride() nor NumPy's .strides), so its layout is unknown; pass a "
                         f"NumPy array, a torch tensor or evt_core.TensorSpec({shape}, {dt!r}) instead")
    return shape, dt, strides


def stride_order(shape, strides):
    """Dims from outermost to innermost stride (size-1 dims keep their position)."""
    return tuple(sorted(range(len(shape)), key=lambda d: (-strides[d] if shape[d] > 1 else 0, d)))


def _parameter(name, example, problem):
    """A run-time scalar for a number (Python or NumPy) or a 0-d array example; a LOAD else."""
    if isinstance(example, (bool, np.bool_)) or isinstance(example, str):
        raise TraceError(f"example for {name!r} is the {type(example).__name__} {example!r}; give a float for a "
                         "run-time scalar, or an array or TensorSpec for a tensor input")
    if isinstance(example, np.ndarray) and example.ndim == 0 and not _real_kind(example.dtype):
        # as for a Python number: only a real float or integer is a scalar (call's scalar_value
        # takes the same 0-d arrays at run time)
        raise TraceError(f"example for {name!r} is a 0-d array of dtype {example.dtype}; give a float (or a 0-d "
                         "float array) for a run-time scalar, or an array or TensorSpec for a tensor input")
    if isinstance(example, numbers.Real) or isinstance(example, np.ndarray) and example.ndim == 0:
        return Node(Op.SCALAR, arg=name)
    shape, dt, strides = _example_of(name, example)
    op = Operand(name, dt, dims=(), view=(), order=stride_order(shape, strides), example_shape=shape)
    return Node(Op.LOAD, arg=op, shape=shape)


def _signature(fn):
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        raise TraceError(f"{fn!r} is not a Python function with a signature") from None
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TraceError(f"parameter *{p.name}/**{p.name}: epilogue parameters must be named, one per input")
        if p.name in RESERVED:
            raise TraceError(f"epilogue parameter {p.name!r} is a reserved name: {RESERVED[p.name]}; "
                             f"rename the parameter (e.g. {p.name}_in) and its example")
        names.append(p.name)
    if "accum" not in names:
        raise TraceError(f"{getattr(fn, '__name__', fn)} has no `accum` parameter; the first input of every "
                         f"epilogue is the GEMM accumulator, named accum (parameters: {names})")
    return names


def trace_function(fn, examples):
    """Run `fn` on proxies. Returns (params, problem, batched, {name: Value|number}, order)."""
    if not isinstance(examples, dict):
        raise TraceError("examples must be a dict {name: array | TensorSpec | float}")
    params = _signature(fn)
    for name in params:
        if name not in examples:
            raise TraceError(f"no example for parameter {name!r}; add examples[{name!r}] = an array, "
                             "a TensorSpec or a float")
    acc = examples["accum"]
    if isinstance(acc, numbers.Real):
        raise TraceError("the example for accum must be an array or TensorSpec of the problem shape (M, N) or (L, M, N)")
    acc_shape, _, _ = _example_of("accum", acc)
    if len(acc_shape) not in (2, 3) or 0 in acc_shape:
        raise ShapeError(f"accum example has shape {acc_shape}; it must be (M, N) or (L, M, N) with no zero extent")
    batched = len(acc_shape) == 3
    problem = tuple(acc_shape) if batched else (1,) + tuple(acc_shape)
    values = {}
    for name in params:
        if name == "accum":
            values[name] = Value(Node(Op.ACCUM, shape=acc_shape))
        else:
            values[name] = Value(_parameter(name, examples[name], problem))
    token = _problem.set(problem)
    try:
        result = fn(**values)
    except EvtError:
        raise
    except NameError as e:
        raise TraceError(f"{e}: a name used in the epilogue is not defined; pass it as a parameter "
                         "(with an example) or define it") from None
    except Exception as e:  # noqa: BLE001 - any user error during tracing becomes a TraceError
        raise TraceError(f"the epilogue raised {type(e).__name__}: {e}") from e
    finally:
        _problem.reset(token)
    returned = _returned(fn, result)
    return params, problem, batched, returned


def _returned(fn, result):
    if result is None:
        raise TraceError(f"{getattr(fn, '__name__', 'the epilogue')} returns nothing; end it with "
                         "`return D` (or `return D, F`, or a dict {'D': D})")
    if isinstance(result, dict):
        if not result:
            raise TraceError("the epilogue returns an empty dict; return at least one output")
        for k in result:
            if not isinstance(k, str) or not k.isidentifier():
                raise TraceError(f"output name {k!r} must be a string identifier")
        return dict(result)
    items = result if isinstance(result, tuple) else (result,)
    names = _return_names(fn, len(items))
    return dict(zip(names, items))


def _return_names(fn, count):
    try:
        src = textwrap.dedent(inspect.getsource(fn))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        raise TraceError(f"cannot read the source of {getattr(fn, '__name__', fn)} (a lambda, a REPL or exec'd "
                         "function) to name its outputs; return a dict {'D': D, ...} instead") from None
    func = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))), None)
    if isinstance(func, ast.Lambda) or func is None:
        raise TraceError("a lambda's outputs have no names; return a dict {'D': ...} from it")
    found = set()
    for node in _own_returns(func):
        elts = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
        names = []
        for i, e in enumerate(elts):
            if not isinstance(e, ast.Name):
                expr = ast.unparse(e) if e is not None else "nothing"
                raise TraceError(f"returned expression #{i} `{expr}` has no name; assign it to a variable "
                                 "first (D = ...; return D) or return a dict")
            names.append(e.id)
        found.add(tuple(names))
    if len(found) != 1:
        raise TraceError("the epilogue's return statements return different names; use one return")
    names = found.pop()
    if len(names) != count:
        raise TraceError(f"could not match the returned names {names} to {count} returned values")
    if len(set(names)) != len(names):
        raise TraceError(f"a name is returned twice in {names}; return a dict to alias outputs")
    return names


def _own_returns(func):
    """Return statements of `func` itself, not of nested functions."""
    stack = list(func.body)
    while stack:
        n = stack.pop()
        if isinstance(n, ast.Return):
            yield n
        elif not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))
