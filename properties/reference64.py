"""An independent float64 evaluator of a strategies.Spec: the oracle of the property tests.

It shares nothing with evt_core: its op definitions are written here with math/NumPy in
float64, and values broadcast with plain NumPy rules against the user's arrays. Besides each
output's value it computes a running forward-error bound for the fp32 evaluation the kernel
performs (first-order, elementwise):

  * a value that is exact in fp32 (operands exact and the float64 result representable in
    fp32, for + - * neg abs relu max min where multiply_add) has bound 0;
  * otherwise each rounding adds c*u*scale (u = 2**-24; c and scale per op below, larger for
    the transcendental formulas the op table evaluates in several fp32 steps), and operand
    errors propagate through the op (by the product rule, or numerically through f over
    [x - e, x + e] for unary functions).

`ambiguous` is set when a comparison's operands are closer than their error bounds (fp32 and
float64 could then take different branches); strategies only compare exact values, so this
should not happen, and the tests assume it does not.
"""
import math
from dataclasses import dataclass

import numpy as np

U = 2.0 ** -24
_K = math.sqrt(2.0 / math.pi)
_A = 0.044715
_erf = np.vectorize(math.erf, otypes=[np.float64])


def _gelu(x): return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))
def _inner(x): return _K * (x + _A * x ** 3)
def _gelu_tanh(x): return 0.5 * x * (1.0 + np.tanh(_inner(x)))


def _gelu_tanh_grad(x):
    t = np.tanh(_inner(x))
    return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * _K * (1.0 + 3.0 * _A * x * x)


def _pdf(x): return np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
def _gelu_grad(x): return 0.5 * (1.0 + _erf(x / math.sqrt(2.0))) + x * _pdf(x)
def _sigmoid(x): return 1.0 / (1.0 + np.exp(-x))


UNARY = {
    "neg": np.negative, "abs": np.abs, "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu, "gelu_tanh": _gelu_tanh, "gelu_tanh_grad": _gelu_tanh_grad, "gelu_grad": _gelu_grad,
    "sigmoid": _sigmoid, "silu": lambda x: x * _sigmoid(x), "tanh": np.tanh, "exp": np.exp,
    "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1.0 / np.sqrt(x), "erf": _erf,
}
EXACT_UNARY = frozenset({"neg", "abs", "relu"})


def _tanh_err(x):
    """Absolute error of tanh(inner(x)) computed in fp32 (t is clamped to [-1, 1], so near
    saturation the error is at most the distance to +-1)."""
    inner = _inner(x)
    s = 1.0 - np.tanh(inner) ** 2
    return np.minimum(2 * U, 2 * s) + 6 * U * (1 + np.abs(inner)) * s, s


def _rounding(op, x, v):
    """Error of one evaluation of unary `op` in fp32 at an exact argument x (value v)."""
    ax, av = np.abs(x), np.abs(v)
    if op in ("tanh", "exp", "sqrt", "rsqrt", "sigmoid", "erf"):
        return 4 * U * av
    if op == "log":
        return 4 * U * av + 2 * U
    if op == "silu":
        return 8 * U * av
    if op == "gelu":
        return 6 * U * (av + ax)
    if op == "gelu_grad":
        # Phi(x): erf to ~2 ulp of a value <= 1 plus the 1 + erf and final-add roundings; the
        # density term p = |x| phi(x) in four fp32 steps, where exp's argument -x*x/2 is rounded
        # (relative error U) so exp carries a relative error of about U * x*x/2 on top of its own.
        p = ax * _pdf(x)
        return 8 * U * (1.0 + av) + 8 * U * p * (1.0 + x * x)
    et, s = _tanh_err(x)
    if op == "gelu_tanh":
        return 0.5 * ax * et * 1.5 + 6 * U * (av + U * ax)
    if op == "gelu_tanh_grad":
        poly = 0.5 * ax * _K * (1.0 + 3.0 * _A * x * x)
        return 0.5 * et * 1.5 + poly * (2 * et + np.minimum(U, 2 * s)) * 1.5 + 8 * U * (1.0 + av + poly * s)
    raise KeyError(op)


def _unary(op, x, e):
    f = UNARY[op]
    with np.errstate(all="ignore"):
        v = f(x)
        if op in EXACT_UNARY:
            return v, e
        prop = np.maximum(np.abs(f(x + e) - v), np.abs(f(x - e) - v)) * 1.25
        return v, np.where(e > 0, prop, 0.0) + _rounding(op, x, v)


def _fp32_exact(v):
    return np.asarray(v, np.float32).astype(np.float64) == v


@dataclass
class Result:
    values: dict      # output name -> float64 array (the user's output shape)
    bounds: dict      # output name -> float64 array: error bound of an fp32 evaluation, pre-store
    ambiguous: bool


def evaluate(spec, A, B, inputs):
    A64, B64 = np.asarray(A, np.float64), np.asarray(B, np.float64)
    acc = np.matmul(A64, B64)
    vals, errs = [], []
    ambiguous = False
    for op, args, attr in spec.nodes:
        x = [vals[i] for i in args]
        e = [errs[i] for i in args]
        if op == "accum":
            v, er = acc, 0.0
        elif op == "input":
            v, er = np.asarray(inputs[attr], np.float64), 0.0
        elif op == "scalar":
            v, er = np.float64(inputs[attr]), 0.0
        elif op == "const":
            v, er = np.float64(attr), 0.0
        elif op == "permute":
            v, er = np.transpose(x[0], attr), np.transpose(np.broadcast_to(e[0], np.shape(x[0])), attr)
        elif op in UNARY:
            v, er = _unary(op, x[0], e[0])
        elif op in ("add", "sub"):
            v = x[0] + x[1] if op == "add" else x[0] - x[1]
            er = _round(v, e[0] + e[1], e[0], e[1])
        elif op == "mul":
            v = x[0] * x[1]
            er = _round(v, np.abs(x[0]) * e[1] + np.abs(x[1]) * e[0] + e[0] * e[1], e[0], e[1])
        elif op == "div":
            v = x[0] / x[1]
            den = np.abs(x[1]) - e[1]
            er = (e[0] + np.abs(v) * e[1]) / den + 2 * U * np.abs(v)
        elif op == "multiply_add":
            p = x[0] * x[1]
            v = p + x[2]
            ep = np.abs(x[0]) * e[1] + np.abs(x[1]) * e[0] + e[0] * e[1]
            exact = (ep == 0) & (e[2] == 0) & _fp32_exact(p) & _fp32_exact(v)
            er = np.where(exact, 0.0, ep + e[2] + U * np.abs(p) + U * np.abs(v))
        elif op in ("maximum", "minimum"):
            v = np.maximum(x[0], x[1]) if op == "maximum" else np.minimum(x[0], x[1])
            er = np.maximum(e[0], e[1])
        elif op in ("lt", "le", "gt", "ge"):
            v = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal}[op](x[0], x[1])
            v = v.astype(np.float64)
            close = np.abs(x[0] - x[1]) <= 2 * (e[0] + e[1])
            ambiguous |= bool(np.any(close & ((e[0] + e[1]) > 0)))
            er = 0.0
        elif op == "where":
            v = np.where(x[0] != 0, x[1], x[2])
            ambiguous |= bool(np.any((np.abs(x[0]) <= 2 * e[0]) & (e[0] > 0)))
            er = np.where(x[0] != 0, e[1], e[2])
        else:
            raise KeyError(op)
        vals.append(np.asarray(v, np.float64))
        errs.append(np.broadcast_to(np.asarray(er, np.float64), np.shape(v)))
    frame = acc.shape
    out_v, out_e = {}, {}
    for name, i, _dtype, kind, attr in spec.outputs:
        v = np.broadcast_to(vals[i], frame)
        er = np.broadcast_to(errs[i], frame)
        if kind == "store":
            out_v[name], out_e[name] = v.copy(), er.copy()
        elif kind == "permute":
            out_v[name], out_e[name] = np.transpose(v, attr).copy(), np.transpose(er, attr).copy()
        else:
            axes, drop = attr
            letters = "LMN" if spec.batched else "MN"
            ax = tuple(letters.index(a) for a in axes)
            n = math.prod(frame[a] for a in ax)
            if kind in ("sum", "mean"):
                s = np.sum(v, axis=ax, keepdims=True)
                es = np.sum(er, axis=ax, keepdims=True) + n * U * np.sum(np.abs(v), axis=ax, keepdims=True)
                if kind == "mean":
                    s, es = s / n, es / n + 2 * U * np.abs(s / n)
            else:
                f = np.max if kind == "amax" else np.min
                s, es = f(v, axis=ax, keepdims=True), np.max(er, axis=ax, keepdims=True)
            squeeze = tuple(a for a, d in zip(ax, drop) if d)
            out_v[name], out_e[name] = np.squeeze(s, axis=squeeze), np.squeeze(es, axis=squeeze)
    return Result(out_v, out_e, ambiguous)


def _round(v, e, ea, eb):
    """Error after one fp32 rounding of v: 0 when the operands are exact and v fits fp32."""
    exact = (np.asarray(ea) == 0) & (np.asarray(eb) == 0) & _fp32_exact(v)
    return np.where(exact, 0.0, e + U * np.abs(v))
