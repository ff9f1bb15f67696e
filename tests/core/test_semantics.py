"""Each op, each reduction (every axis set, with and without batch), each dtype: the
interpreter against float64 formulas written here, independently of the op table."""
import itertools
import math
import warnings

import ml_dtypes
import numpy as np
import pytest

import evt_core
from evt_core import ops
from tests.core.helpers import empty, gemm, ints

M, N, K, L = 5, 7, 3, 2
erf = np.vectorize(math.erf)
K0, A0 = math.sqrt(2 / math.pi), 0.044715


def sig(x):
    return 1 / (1 + np.exp(-x))


UNARY = {
    "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(K0 * (x + A0 * x ** 3))),
    "gelu_tanh_grad": lambda x: (0.5 * (1 + np.tanh(K0 * (x + A0 * x ** 3)))
                                 + 0.5 * x * (1 - np.tanh(K0 * (x + A0 * x ** 3)) ** 2) * K0 * (1 + 3 * A0 * x * x)),
    "gelu_grad": lambda x: 0.5 * (1 + erf(x / math.sqrt(2))) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi),
    "sigmoid": sig, "silu": lambda x: x * sig(x), "tanh": np.tanh, "exp": np.exp,
    "abs": np.abs, "erf": np.vectorize(math.erf),
}
POSITIVE = {"log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x)}
BINARY = {
    "add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
    "mul": (lambda a, b: a * b, np.multiply), "div": (lambda a, b: a / b, np.divide),
    "lt": (lambda a, b: a < b, np.less), "le": (lambda a, b: a <= b, np.less_equal),
    "gt": (lambda a, b: a > b, np.greater), "ge": (lambda a, b: a >= b, np.greater_equal),
    "maximum": (ops.maximum, np.maximum), "minimum": (ops.minimum, np.minimum),
}


def run(fn, A, B, out_dtype=np.float32, **inputs):
    t = evt_core.trace(fn, {"accum": empty(A.shape[:-1] + (B.shape[-1],)), **inputs,
                            "D": empty(A.shape[:-1] + (B.shape[-1],), out_dtype)})
    return evt_core.interpret(t, A, B, **inputs)["D"]


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name):
    A, B = ints((M, K)), ints((K, N))
    got = run(lambda accum: {"D": getattr(ops, name)(accum * 0.25)}, A, B)
    np.testing.assert_allclose(got, UNARY[name](gemm(A, B) * 0.25), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_unary_positive_domain(name):
    A, B = ints((M, K)), ints((K, N))
    got = run(lambda accum: {"D": getattr(ops, name)(abs(accum) + 0.5)}, A, B)
    np.testing.assert_allclose(got, POSITIVE[name](np.abs(gemm(A, B)) + 0.5), rtol=2e-6)


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_with_row_broadcast(name):
    A, B = ints((M, K)), ints((K, N))
    b = (np.arange(N, dtype=np.float32) - 3) * 0.5 + 0.25
    build, ref = BINARY[name]
    got = run(lambda accum, b: {"D": build(accum, b)}, A, B, b=b)
    np.testing.assert_allclose(got, ref(gemm(A, B), b.astype(np.float64)).astype(np.float64), rtol=1e-6)


def test_ternary_and_neg():
    A, B = ints((M, K)), ints((K, N))
    c = np.linspace(-1, 1, M, dtype=np.float32).reshape(M, 1)
    got = run(lambda accum, c: {"D": ops.where(accum > 0, ops.multiply_add(accum, c, 1.0), -accum)}, A, B, c=c)
    g = gemm(A, B)
    np.testing.assert_allclose(got, np.where(g > 0, g * c + 1, -g), rtol=1e-6)


def test_nan_propagates_through_max_min_and_reductions():
    A, B = ints((M, K)), ints((K, N))
    x = np.zeros((M, N), np.float32)
    x[1, 2] = np.nan
    t = evt_core.trace(lambda accum, x: {"D": ops.maximum(accum, x), "r": ops.amax(accum + x, over="M"),
                                         "s": ops.amin(accum + x, over="N")},
                       {"accum": empty((M, N)), "x": x, "D": empty((M, N)), "r": empty((N,)), "s": empty((M,))})
    out = evt_core.interpret(t, A, B, x=x)
    assert np.isnan(out["D"][1, 2]) and np.isnan(out["r"][2]) and np.isnan(out["s"][1])
    assert not np.isnan(out["D"]).sum() > 1


AXSETS = [s for r in (1, 2, 3) for s in itertools.combinations("LMN", r)]


@pytest.mark.parametrize("red", ["sum", "amax", "amin", "mean"])
@pytest.mark.parametrize("over", AXSETS, ids=lambda s: "".join(s))
@pytest.mark.parametrize("keep", [False, True], ids=["dropped", "kept"])
def test_batched_reductions_every_axis_set(red, over, keep):
    A, B = ints((L, M, K)), ints((L, K, N))
    full = {"L": L, "M": M, "N": N}
    shape = tuple(1 if a in over else full[a] for a in "LMN" if keep or a not in over)
    t = evt_core.trace(lambda accum: {"r": getattr(ops, red)(accum * 0.5 + 1.0, over=over)},
                       {"accum": empty((L, M, N)), "r": empty(shape)})
    got = evt_core.interpret(t, A, B)["r"]
    axes = tuple("LMN".index(a) for a in over)
    np_fn = {"sum": np.sum, "amax": np.max, "amin": np.min, "mean": np.mean}[red]
    ref = np_fn(gemm(A, B) * 0.5 + 1, axis=axes, keepdims=True).reshape(shape)
    assert got.shape == shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=1e-6)


@pytest.mark.parametrize("over", ["M", "N", ("M", "N")])
def test_unbatched_reductions(over):
    A, B = ints((M, K)), ints((K, N))
    shape = {"M": (N,), "N": (M,), ("M", "N"): ()}[over]
    t = evt_core.trace(lambda accum: {"r": ops.sum(accum, over=over)}, {"accum": empty((M, N)), "r": empty(shape)})
    axes = {"M": 0, "N": 1, ("M", "N"): (0, 1)}[over]
    np.testing.assert_allclose(evt_core.interpret(t, A, B)["r"], gemm(A, B).sum(axis=axes))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16])
def test_each_dtype_loads_in_fp32_and_stores_round_to_nearest_even(dtype):
    A, B = ints((M, K), dtype), ints((K, N), dtype)
    C = (np.arange(M * N, dtype=np.float32).reshape(M, N) / 7).astype(dtype)
    got = run(lambda accum, C: {"D": accum / 3.0 + C}, A, B, out_dtype=dtype, C=C)
    exact = (gemm(A, B).astype(np.float32) / np.float32(3) + C.astype(np.float32)).astype(dtype)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got, exact)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_a_store_beyond_the_range_rounds_to_inf_without_a_warning(dtype):
    """IEEE rounding (and the GPU kernels' cvt) takes a value past the largest finite one to
    inf: a defined result, so the reference neither warns nor clamps."""
    A, B = np.ones((2, 1), np.float32), np.ones((1, 2), np.float32)
    big = 3.4e38 if dtype == ml_dtypes.bfloat16 else 1e6     # finite in fp32, past bf16's midpoint to inf
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run(lambda accum: {"D": accum * big}, A, B, out_dtype=dtype)
    assert got.dtype == np.dtype(dtype)
    assert np.isinf(got).all() and (got > 0).all(), got


def test_reduction_rounds_once_at_the_end():
    A, B = np.ones((1, 1), np.float16), np.ones((1, 4096), np.float16)
    t = evt_core.trace(lambda accum: {"r": ops.sum(accum * 1.0009765625, over="N")},
                       {"accum": empty((1, 4096)), "r": empty((1,), np.float16)})
    got = evt_core.interpret(t, A, B)["r"]
    assert got[0] == np.float16(4096 * 1.0009765625)


def test_layout_ops_in_the_interpreter():
    A, B = ints((L, M, K)), ints((L, K, N))
    Ct = np.arange(L * N * M, dtype=np.float32).reshape(L, N, M)
    flat = np.arange(M * N, dtype=np.float32)

    def fn(accum, Ct, flat):
        x = accum * ops.permute(Ct, (0, 2, 1)) + ops.reshape(flat, (M, N))
        return {"Dt": ops.permute(x, (0, 2, 1))}
    t = evt_core.trace(fn, {"accum": empty((L, M, N)), "Ct": Ct, "flat": flat, "Dt": empty((L, N, M))})
    got = evt_core.interpret(t, A, B, Ct=Ct, flat=flat)["Dt"]
    ref = (gemm(A, B) * Ct.transpose(0, 2, 1) + flat.reshape(M, N)).transpose(0, 2, 1)
    np.testing.assert_allclose(got, ref)


def test_gelu_grad_is_the_derivative_of_gelu():
    """gelu_grad against a central difference of gelu in float64 (an independent check of the
    closed form), over the range where both terms matter and out to the tails."""
    x = np.linspace(-6, 6, 241, dtype=np.float32).reshape(241, 1)
    got = run(lambda accum: {"D": ops.gelu_grad(accum)}, x, np.ones((1, 1), np.float32))   # accum = x exactly
    h, x64 = 1e-5, x.astype(np.float64).ravel()
    diff = (UNARY["gelu"](x64 + h) - UNARY["gelu"](x64 - h)) / (2 * h)
    np.testing.assert_allclose(got.ravel(), diff, rtol=0, atol=2e-6)
