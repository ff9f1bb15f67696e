"""The op enum and THE table of op semantics.

Every elementwise op is defined once here, by a NumPy function on float32 arrays; the reference
interpreter, constant folding and the tests read only this table. Backends keep their own
spelling tables keyed by the same `Op` (a test checks that each backend spells every op).
"""
import enum
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np


class Op(enum.Enum):
    # leaves
    ACCUM = "accum"        # the GEMM accumulator, fp32
    LOAD = "load"          # a tensor input; arg = Operand
    SCALAR = "scalar"      # a run-time fp32 scalar passed by value; arg = name
    CONST = "const"        # a compile-time fp32 constant; arg = float
    # elementwise compute (always fp32)
    ADD = "add"; SUB = "sub"; MUL = "mul"; DIV = "div"; NEG = "neg"
    LT = "lt"; LE = "le"; GT = "gt"; GE = "ge"
    MAXIMUM = "maximum"; MINIMUM = "minimum"
    RELU = "relu"; GELU = "gelu"; GELU_TANH = "gelu_tanh"; GELU_TANH_GRAD = "gelu_tanh_grad"
    GELU_GRAD = "gelu_grad"
    SIGMOID = "sigmoid"; SILU = "silu"; TANH = "tanh"; EXP = "exp"; LOG = "log"
    SQRT = "sqrt"; RSQRT = "rsqrt"; ABS = "abs"; ERF = "erf"
    MULTIPLY_ADD = "multiply_add"; WHERE = "where"
    # layout (IR only: layout elimination folds them into load/store views)
    PERMUTE = "permute"; RESHAPE = "reshape"
    # reductions over named problem axes; arg = Reduce
    SUM = "sum"; AMAX = "amax"; AMIN = "amin"; MEAN = "mean"
    # sinks and structure
    STORE = "store"        # writes its input to an output and returns it; arg = Operand
    TOPO = "topo"          # a fused sub-DAG (topological visitor); arg = body node, src = its inputs
    ARG = "arg"            # placeholder for TOPO input i inside a body; arg = i
    SINK = "sink"          # the root joining all outputs of a tree


@dataclass(frozen=True)
class OpInfo:
    arity: int
    fn: Callable            # float32 ndarrays -> float32 ndarray
    commutative: bool = False


_K = np.float32(math.sqrt(2.0 / math.pi))
_A = np.float32(0.044715)
_erf = np.vectorize(math.erf, otypes=[np.float64])
erf = _erf                # public: the graph level (evt_core.partition) uses the same erf
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = np.float32(1.0 / math.sqrt(2.0 * math.pi))


def _f32(f):
    def g(*xs):
        with np.errstate(all="ignore"):
            return np.asarray(f(*[np.asarray(x, np.float32) for x in xs]), np.float32)
    g.__name__ = f.__name__
    return g


def _gelu(x):
    # erf computed in float64 then rounded: NumPy has no float32 erf; the difference is far
    # below any backend's tolerance and keeps the reference deterministic.
    return x * np.float32(0.5) * (np.float32(1) + _erf(x.astype(np.float64) * _SQRT_HALF).astype(np.float32))


def _gelu_tanh(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(_K * (x + _A * x * x * x)))


def _gelu_tanh_grad(x):
    """d/dx gelu_tanh(x): the backward of the tanh-form GELU (cuBLASLt's DGELU)."""
    t = np.tanh(_K * (x + _A * x * x * x))
    return np.float32(0.5) * (np.float32(1) + t) + np.float32(0.5) * x * (np.float32(1) - t * t) * _K * (
        np.float32(1) + np.float32(3) * _A * x * x)


def _gelu_grad(x):
    """d/dx gelu(x), the erf form: Phi(x) + x * phi(x) (the backward of BERT's GELU). erf in
    float64 then rounded, as in _gelu; the density term in float32, one rounding per step."""
    cdf = np.float32(0.5) * (np.float32(1) + _erf(x.astype(np.float64) * _SQRT_HALF).astype(np.float32))
    return cdf + x * (np.exp(np.float32(-0.5) * x * x) * _INV_SQRT_2PI)


def _erf32(x):
    """erf in float64 then rounded, as in _gelu (NumPy has no float32 erf)."""
    return _erf(x.astype(np.float64)).astype(np.float32)


def _sigmoid(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


ELEMENTWISE = {
    Op.ADD: OpInfo(2, _f32(np.add), True),
    Op.SUB: OpInfo(2, _f32(np.subtract)),
    Op.MUL: OpInfo(2, _f32(np.multiply), True),
    Op.DIV: OpInfo(2, _f32(np.divide)),
    Op.NEG: OpInfo(1, _f32(np.negative)),
    Op.LT: OpInfo(2, _f32(lambda a, b: (a < b).astype(np.float32))),
    Op.LE: OpInfo(2, _f32(lambda a, b: (a <= b).astype(np.float32))),
    Op.GT: OpInfo(2, _f32(lambda a, b: (a > b).astype(np.float32))),
    Op.GE: OpInfo(2, _f32(lambda a, b: (a >= b).astype(np.float32))),
    # np.maximum/minimum propagate NaN, which is the documented semantics
    Op.MAXIMUM: OpInfo(2, _f32(np.maximum), True),
    Op.MINIMUM: OpInfo(2, _f32(np.minimum), True),
    Op.RELU: OpInfo(1, _f32(lambda x: np.maximum(x, np.float32(0)))),
    Op.GELU: OpInfo(1, _f32(_gelu)),
    Op.GELU_TANH: OpInfo(1, _f32(_gelu_tanh)),
    Op.GELU_TANH_GRAD: OpInfo(1, _f32(_gelu_tanh_grad)),
    Op.GELU_GRAD: OpInfo(1, _f32(_gelu_grad)),
    Op.SIGMOID: OpInfo(1, _f32(_sigmoid)),
    Op.SILU: OpInfo(1, _f32(lambda x: x * _sigmoid(x))),
    Op.TANH: OpInfo(1, _f32(np.tanh)),
    Op.EXP: OpInfo(1, _f32(np.exp)),
    Op.LOG: OpInfo(1, _f32(np.log)),
    Op.SQRT: OpInfo(1, _f32(np.sqrt)),
    Op.RSQRT: OpInfo(1, _f32(lambda x: np.float32(1) / np.sqrt(x))),
    Op.ABS: OpInfo(1, _f32(np.abs)),
    Op.ERF: OpInfo(1, _f32(_erf32)),
    Op.MULTIPLY_ADD: OpInfo(3, _f32(lambda a, b, c: a * b + c)),
    Op.WHERE: OpInfo(3, _f32(lambda c, a, b: np.where(c != 0, a, b))),
}


@dataclass(frozen=True)
class ReduceInfo:
    identity: float
    fn: Callable            # (float32 array, axis tuple) -> float32 array, keepdims


REDUCTIONS = {
    Op.SUM: ReduceInfo(0.0, lambda x, ax: np.sum(x, axis=ax, dtype=np.float32, keepdims=True)),
    Op.MEAN: ReduceInfo(0.0, lambda x, ax: np.mean(x, axis=ax, dtype=np.float32, keepdims=True)),
    Op.AMAX: ReduceInfo(-math.inf, lambda x, ax: np.max(x, axis=ax, keepdims=True)),
    Op.AMIN: ReduceInfo(math.inf, lambda x, ax: np.min(x, axis=ax, keepdims=True)),
}

LEAVES = frozenset({Op.ACCUM, Op.LOAD, Op.SCALAR, Op.CONST, Op.ARG})
LAYOUT = frozenset({Op.PERMUTE, Op.RESHAPE})
AXES = ("L", "M", "N")
