"""Trace-time rows: the API entry points, examples, and Python inside epilogues."""
import math

import numpy as np

import evt_core
from evt_core import TensorSpec, ops
from evt_core.errors import DTypeError, ShapeError, TraceError, UnsupportedError

from .common import M, N, Row, empty, trace

D = empty((M, N))


def _epi(body):
    """A one-output epilogue `D = body(accum)` traced at (M, N)."""
    return lambda: trace(lambda accum: {"D": body(accum)}, D=D)


def _fn_with(param):
    ns = {}
    exec(f"def epi(accum, {param}):\n    return {{'D': accum + {param}}}", ns)
    return ns["epi"]


def _no_return(accum):
    D = accum  # noqa: F841 - the missing return is the point


def _two_returns(accum):
    D, F = accum, accum
    if False:
        return F
    return D


def _unnamed(accum):
    D = accum
    return D, accum * 2


def _twice(accum):
    D = accum
    return D, D


def _as_input(accum, C):
    return {"C": accum}


def _star(accum, *rest):
    return {"D": accum}


def _kw(accum, **rest):
    return {"D": accum}


def _no_accum(x):
    return {"D": x}


def _unpack(accum):
    a, b = accum
    return {"D": a}


def _reduce_used(accum):
    s = ops.sum(accum, over="N")
    return {"D": accum - s}


def _undefined(accum):
    return {"D": accum + undefined_bias}  # noqa: F821


def _div0(accum):
    return {"D": accum * (1 / 0)}


def _same_as(body, plain):
    """(result of the epilogue `body`, result of its plain spelling) on the same operands."""
    A, B = np.arange(M * 2.0).reshape(M, 2).astype(np.float16), np.ones((2, N), np.float16)
    return tuple(evt_core.interpret(_epi(f)(), A, B) for f in (body, plain))


ROWS = [
    # ---- the API
    Row("trace-without-examples", lambda: evt_core.trace(lambda accum: {"D": accum}), TraceError, "examples"),
    Row("trace-examples-not-a-dict", lambda: evt_core.trace(lambda accum: {"D": accum}, [D]), TraceError,
        "examples must be a dict"),
    Row("trace-not-a-function", lambda: evt_core.trace("relu", {"accum": D}), TraceError, "'relu'"),
    Row("trace-lambda-tuple-return", lambda: evt_core.trace(lambda accum: accum, {"accum": D, "D": D}),
        TraceError, "lambda"),
    Row("no-accum-parameter", lambda: evt_core.trace(_no_accum, {"x": D, "D": D}), TraceError, "`accum`"),
    Row("star-args-parameter", lambda: trace(_star, D=D), TraceError, "*rest"),
    Row("star-star-kwargs-parameter", lambda: trace(_kw, D=D), TraceError, "**rest"),
    Row("parameter-named-B", lambda: trace(_fn_with("B"), B=empty((N,)), D=D), TraceError, "parameter 'B'"),
    Row("parameter-named-A", lambda: trace(_fn_with("A"), A=empty((N,)), D=D), TraceError, "parameter 'A'"),
    Row("parameter-named-self", lambda: trace(_fn_with("self"), self=empty((N,)), D=D), TraceError,
        "parameter 'self'"),
    Row("missing-example-for-parameter", lambda: trace(_fn_with("bias"), D=D), TraceError, "'bias'"),
    Row("missing-example-for-output", lambda: trace(_fn_with("bias"), bias=empty((N,))), TraceError, "output 'D'"),
    Row("unknown-example-key", lambda: trace(_fn_with("bias"), bias=empty((N,)), bais=empty((N,)), D=D),
        TraceError, "'bais' is neither"),
    Row("unknown-example-key-suggests", lambda: trace(_fn_with("bias"), bias=empty((N,)), biass=empty((N,)), D=D),
        TraceError, "did you mean 'bias'"),
    Row("example-key-not-a-string", lambda: evt_core.trace(lambda accum: {"D": accum}, {"accum": D, "D": D, 0: D}),
        TraceError, "example 0 is neither"),
    Row("float-example-for-output", lambda: trace(lambda accum: {"D": accum}, D=1.0), TraceError, "output 'D'"),
    Row("compile-not-a-tree", lambda: evt_core.compile(lambda accum: accum, "numpy"), TraceError,
        "expected a tree"),
    Row("interpret-not-a-tree", lambda: evt_core.interpret(None, D, D), TraceError, "expected a tree"),
    # ---- what the epilogue returns
    Row("no-return", lambda: trace(_no_return, D=D), TraceError, "returns nothing"),
    Row("two-different-returns", lambda: trace(_two_returns, D=D, F=D), TraceError, "different names"),
    Row("unnamed-returned-expression", lambda: trace(_unnamed, D=D), TraceError, "#1 `accum * 2`"),
    Row("name-returned-twice", lambda: trace(_twice, D=D), TraceError, "returned twice"),
    Row("output-named-like-input", lambda: trace(_as_input, C=D), TraceError, "output 'C'"),
    Row("empty-dict-return", lambda: trace(lambda accum: {}, D=D), TraceError, "empty dict"),
    Row("non-identifier-output-name", lambda: trace(lambda accum: {"my out": accum}, D=D), TraceError, "'my out'"),
    Row("list-returned-as-output", _epi(lambda a: [a]), TraceError, "output 'D'"),
    Row("string-returned-as-output", _epi(lambda a: "D"), TraceError, "output 'D'"),
    # ---- Python and NumPy inside the epilogue
    Row("np-sum", _epi(lambda a: np.sum(a)), TraceError, "ops.sum(x, over=...)"),
    Row("np-add-reduce", _epi(lambda a: np.add.reduce(a)), TraceError, "ops.sum(x, over=...)"),
    Row("np-max", _epi(lambda a: np.max(a)), TraceError, "ops.amax"),
    Row("np-mean", _epi(lambda a: np.mean(a)), TraceError, "ops.mean"),
    Row("np-clip", _epi(lambda a: np.clip(a, 0, 1)), TraceError, "ops.minimum(ops.maximum(x, lo), hi)"),
    Row("np-where", _epi(lambda a: np.where(a > 0, a, 0)), TraceError, "ops.where"),
    Row("np-maximum", _epi(lambda a: np.maximum(a, 0)), TraceError, "ops.maximum"),
    Row("np-exp", _epi(lambda a: np.exp(a)), TraceError, "ops.exp"),
    Row("np-abs", _epi(lambda a: np.abs(a)), TraceError, "ops.abs"),
    Row("np-sin-has-no-op", _epi(lambda a: np.sin(a)), TraceError, "np.sin was called on a traced value and has no"),
    Row("np-matmul-has-no-op", _epi(lambda a: np.matmul(a, a)), TraceError, "np.matmul"),
    Row("math-exp", _epi(lambda a: math.exp(a)), TraceError, "ops.exp"),
    Row("python-if", _epi(lambda a: a if a > 0 else -a), TraceError, "ops.where"),
    Row("python-max", _epi(lambda a: max(a, 0.0)), TraceError, "ops.maximum"),
    Row("python-and", _epi(lambda a: (a > 0) and a), TraceError, "ops.where"),
    Row("equality", _epi(lambda a: a == 1.0), TraceError, "`==`"),
    Row("indexing", _epi(lambda a: a[0]), TraceError, "indexing traced value accum[0]"),
    Row("tuple-unpacking", lambda: trace(_unpack, D=D), TraceError, "indexing traced value accum"),
    Row("int-of-traced", _epi(lambda a: int(a)), TraceError, "accum"),
    Row("power-3", _epi(lambda a: a ** 3), TraceError, "** 3"),
    Row("string-operand", _epi(lambda a: a + "1"), TraceError, "type str"),
    Row("unknown-op", _epi(lambda a: ops.softmax(a)), TraceError, "ops.softmax"),
    Row("over-0", lambda: trace(lambda accum: {"r": ops.sum(accum, over=0)}, r=empty((N,))), TraceError, "over=0"),
    Row("over-K", lambda: trace(lambda accum: {"r": ops.sum(accum, over="K")}, r=empty((N,))), TraceError,
        "over='K'"),
    Row("over-None", lambda: trace(lambda accum: {"r": ops.amax(accum, over=None)}, r=empty((N,))), TraceError,
        "ops.amax(x) needs over="),
    Row("over-missing", lambda: trace(lambda accum: {"r": ops.sum(accum)}, r=empty((N,))), TraceError,
        "ops.sum(x) needs over="),
    Row("over-empty-tuple", lambda: trace(lambda accum: {"r": ops.sum(accum, over=())}, r=empty((N,))),
        TraceError, "over=()"),
    Row("over-mixed", lambda: trace(lambda accum: {"r": ops.mean(accum, over=("M", 1))}, r=empty((N,))),
        TraceError, "over=('M', 1)"),
    Row("reduction-result-consumed", lambda: trace(_reduce_used, D=D), TraceError, "can only be returned"),
    Row("undefined-name", lambda: trace(_undefined, D=D), TraceError, "undefined_bias"),
    Row("epilogue-raises", lambda: trace(_div0, D=D), TraceError, "ZeroDivisionError"),
    Row("op-outside-trace", lambda: ops.relu(1.0), TraceError, "outside evt_core.trace"),
    Row("numpy-scalar-on-the-left", lambda: _same_as(lambda a: np.float32(2) * a - np.float64(1),
                                                     lambda a: 2.0 * a - 1.0), None),
    # ---- shapes and layouts at trace time
    Row("accum-example-1d", lambda: evt_core.trace(lambda accum: {"D": accum}, {"accum": empty((N,)), "D": D}),
        ShapeError, "accum example"),
    Row("accum-example-zero-extent",
        lambda: evt_core.trace(lambda accum: {"D": accum}, {"accum": empty((0, N)), "D": empty((0, N))}),
        ShapeError, "accum example"),
    Row("accum-example-float", lambda: evt_core.trace(lambda accum: {"D": accum}, {"accum": 1.0, "D": D}),
        TraceError, "accum"),
    Row("aux-does-not-broadcast",
        lambda: trace(lambda accum, u, v: {"D": accum + u * v}, u=empty((5,)), v=empty((6,)), D=D),
        ShapeError, "u has shape (5,)"),
    Row("aux-does-not-fit-problem", lambda: trace(_fn_with("C"), C=empty((3, M, N)), D=D), ShapeError, "(3, 4, 6)"),
    Row("output-shape-wrong", lambda: trace(lambda accum: {"D": accum}, D=empty((N,))), ShapeError, "'D'"),
    Row("reduction-output-shape-wrong", lambda: trace(lambda accum: {"r": ops.sum(accum, over="N")},
                                                      r=empty((N,))), ShapeError, "'r' has shape (6,)"),
    Row("reduce-over-L-unbatched", lambda: trace(lambda accum: {"r": ops.sum(accum, over="L")}, r=D),
        ShapeError, "'r' reduces over L"),
    Row("layout-no-node-kind-expresses",
        lambda: evt_core.trace(lambda accum: {"D": ops.permute(accum, (1, 0)) + accum},
                               {"accum": empty((M, M)), "D": empty((M, M))}), UnsupportedError, "permute(accum"),
    Row("reshape-wrong-size", _epi(lambda a: ops.reshape(a, (5, 5))), ShapeError, "reshape"),
    Row("reshape-shape-a-string", _epi(lambda a: ops.reshape(a, "MN")), TraceError, "ops.reshape(x, shape='MN')"),
    Row("permute-dims-an-int", _epi(lambda a: ops.permute(a, 0)), TraceError, "ops.permute(x, dims=0)"),
    Row("permute-not-a-permutation", _epi(lambda a: ops.permute(a, (0, 0))), TraceError, "permute(accum, (0, 0))"),
    Row("constant-beyond-fp32", _epi(lambda a: a * 1e300), TraceError, "1e+300, is beyond float32"),
    Row("output-constant-beyond-fp32", _epi(lambda a: -1e39), TraceError, "output 'D'"),
    Row("constant-int-beyond-float64", _epi(lambda a: a * 10 ** 400), TraceError, "~1e+400, is beyond float32"),
    *([Row("constant-longdouble-beyond-float64", _epi(lambda a: a * np.longdouble("1e4000")), TraceError,
        "np.longdouble('1e+4000'), is beyond float32")]
      if np.finfo(np.longdouble).max > np.finfo(np.float64).max else []),   # 80-bit long double only
    Row("output-constant-int-beyond-float64", _epi(lambda a: 10 ** 400), TraceError, "output 'D', ~1e+400"),
    Row("constant-inf-is-valid", lambda: _same_as(lambda a: ops.minimum(a, float("inf")), lambda a: a * 1.0), None),
    Row("output-a-bool", _epi(lambda a: True), TraceError, "output 'D' is a bool"),
    # ---- examples
    Row("example-a-list", lambda: trace(_fn_with("C"), C=[1.0] * N, D=D), TraceError, "example for 'C' is a list"),
    Row("example-a-string", lambda: trace(_fn_with("alpha"), alpha="0.5", D=D), TraceError, "'alpha'"),
    Row("example-a-bool", lambda: trace(_fn_with("alpha"), alpha=True, D=D), TraceError, "'alpha' is the bool"),
    Row("example-0d-bool-array", lambda: trace(_fn_with("alpha"), alpha=np.array(True), D=D), TraceError,
        "'alpha' is a 0-d array of dtype bool"),
    Row("example-0d-str-array", lambda: trace(_fn_with("alpha"), alpha=np.array("0.5"), D=D), TraceError,
        "'alpha' is a 0-d array of dtype <U3"),
    Row("example-0d-complex-array", lambda: trace(_fn_with("alpha"), alpha=np.array(1 + 2j), D=D), TraceError,
        "'alpha' is a 0-d array of dtype complex128"),
    Row("example-0d-object-array", lambda: trace(_fn_with("alpha"), alpha=np.array(None), D=D), TraceError,
        "'alpha' is a 0-d array of dtype object"),
    Row("example-0d-bytes-array", lambda: trace(_fn_with("alpha"), alpha=np.array(b"x"), D=D), TraceError,
        "'alpha' is a 0-d array of dtype |S1"),
    Row("example-without-strides", lambda: trace(_fn_with("C"), C=_NoStrides(), D=D), TraceError,
        "example for 'C' is a _NoStrides with a shape and dtype but no strides"),
    Row("example-output-float64", lambda: trace(lambda accum: {"D": accum}, D=empty((M, N), np.float64)),
        DTypeError, "example 'D' has dtype float64"),
    Row("example-output-big-endian", lambda: trace(lambda accum: {"D": accum}, D=empty((M, N), ">f2")),
        DTypeError, "example 'D' is float16 stored big-endian"),
    Row("example-input-int64", lambda: trace(_fn_with("C"), C=np.zeros((M, N), np.int64), D=D), DTypeError,
        "example 'C'"),
    Row("example-input-complex", lambda: trace(_fn_with("C"), C=np.zeros((M, N), np.complex64), D=D), DTypeError,
        "complex"),
    Row("tensorspec-negative-extent", lambda: TensorSpec((M, -1), "float16"), ShapeError, "TensorSpec(4, -1)"),
    Row("tensorspec-float64", lambda: TensorSpec((M, N), "float64"), DTypeError, "TensorSpec(4, 6) has dtype"),
    Row("tensorspec-stride-count", lambda: TensorSpec((M, N), "float16", strides=(1,)), TraceError,
        "1 strides given for 2 dims"),
    Row("tensorspec-shape-a-name", lambda: TensorSpec(("M", N), "float16"), ShapeError, "shape=('M', 6) holds 'M'"),
    Row("tensorspec-shape-None", lambda: TensorSpec(None, "float16"), ShapeError, "shape=None is not a tuple"),
    Row("tensorspec-shape-an-int", lambda: TensorSpec(M, "float16"), ShapeError, "shape=4 is not a tuple"),
    Row("tensorspec-shape-inf", lambda: TensorSpec((math.inf, N), "float16"), ShapeError, "shape=(inf, 6) holds inf"),
    Row("tensorspec-shape-non-integral", lambda: TensorSpec((4.7, N), "float16"), ShapeError,
        "shape=(4.7, 6) holds 4.7"),
    Row("tensorspec-shape-integral-float", lambda: TensorSpec((4.0, N), "float16"), ShapeError,
        "shape=(4.0, 6) holds 4.0"),
    Row("tensorspec-strides-an-int", lambda: TensorSpec((M, N), "float16", strides=N), ShapeError,
        "TensorSpec(4, 6): strides=6 is not a tuple"),
    Row("tensorspec-strides-None-entry", lambda: TensorSpec((M, N), "float16", strides=(None, 1)), ShapeError,
        "strides=(None, 1) holds None"),
    Row("tensorspec-strides-non-integral", lambda: TensorSpec((M, N), "float16", strides=(6.9, 1)), ShapeError,
        "strides=(6.9, 1) holds 6.9"),
    Row("tensorspec-numpy-ints", lambda: _numpy_int_spec(), None),
    Row("example-np-float32-scalar", lambda: _same_scalar(np.float32(0.5)), None),
    Row("example-0d-array-scalar", lambda: _same_scalar(np.array(0.5)), None),
    Row("example-0d-int-array-scalar", lambda: _same_scalar(np.array(1, np.int32)), None),
]


def _same_scalar(example):
    """A NumPy or 0-d scalar example traces to the same run-time scalar as a Python float."""
    A, B = np.ones((M, 2), np.float16), np.ones((2, N), np.float16)
    trees = [trace(_fn_with("alpha"), alpha=ex, D=D) for ex in (example, 0.5)]
    return tuple(evt_core.interpret(t, A, B, alpha=0.25) for t in trees)


class _NoStrides:
    """A duck array (as JAX's): a shape and a dtype, but neither .strides nor .stride()."""
    shape, dtype = (M, N), np.dtype(np.float32)


def _numpy_int_spec():
    """A TensorSpec of NumPy-integer extents and strides traces like one of Python ints."""
    A, B = np.ones((M, 2), np.float16), np.ones((2, N), np.float16)
    C = np.arange(M * N, dtype=np.float32).reshape(M, N)
    specs = [TensorSpec((np.int64(M), np.int32(N)), "float32", strides=[np.int64(1), np.uint8(M)]),
             TensorSpec((M, N), "float32", strides=(1, M))]
    return tuple(evt_core.interpret(trace(_fn_with("C"), C=spec, D=D), A, B, C=C) for spec in specs)
