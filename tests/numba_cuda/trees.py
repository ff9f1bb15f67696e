"""Epilogues and inputs shared by the numba_cuda tests (simulator, PTX and GPU).

Each case builds (tree, A, B, inputs) for a problem (L, M, N, K); inputs are small integers so
the GEMM is exact in fp32 and only transcendental ops need a tolerance (toolchain-notes §5.1).
"""
import numpy as np

import evt_core
from evt_core import ops
from evt_core.dtypes import DTYPES
from tests.tolerances import reassociation_atol


def bias_relu_stats(accum, C, alpha, bias):
    F = alpha * accum + C
    D = ops.relu(F + bias) + 1.0
    F_colmax = ops.amax(F, over="M")
    F_rowsum = ops.sum(F, over="N")
    D_min = ops.amin(D, over=("M", "N"))
    return D, F, F_colmax, F_rowsum, D_min


def activations(accum, rowscale, colbias):
    x = accum * rowscale + colbias
    g = ops.gelu(x * 0.25) + ops.gelu_grad(x * 0.25)
    t = ops.gelu_tanh(x * 0.25) - ops.sigmoid(x) + ops.silu(x * 0.1) * ops.tanh(x * 0.1)
    d = ops.gelu_tanh_grad(x * 0.1) + ops.exp(-ops.abs(x)) + ops.log(ops.abs(x) + 1.0)
    s = ops.sqrt(ops.abs(x)) + ops.rsqrt(ops.abs(x) + 1.0) - ops.maximum(x, 2.0) + ops.minimum(x, -1.0)
    w = ops.where(x > 0.0, x / 3.0, -x) + ops.multiply_add(x, 0.5, 1.0)
    c = (x < 1.0) + (x <= 2.0) + (x >= 0.0) - x
    out = g + t + d + s + w + c
    return out


def dgelu(accum, z):
    """BERT's GELU backward, dz = dh * gelu'(z) in the erf form. Its column sum (dbias) is left
    out: compare()'s fp32 atol assumes exact sums, and inexact terms summed in another order come
    close to it at the GPU shapes (tests/gpu/test_cupy.py checks dbias with a reassociation allowance)."""
    dz = accum * ops.gelu_grad(z)
    return {"dz": dz}


def means(accum, aux):
    y = accum + aux
    y_colmean = ops.mean(y, over="M")
    y_rowmean = ops.mean(y, over="N")
    y_batchsum = ops.sum(y, over="L")
    y_all = ops.amax(y, over=("L", "M", "N"))
    return y, y_colmean, y_rowmean, y_batchsum, y_all


def stats(accum, bias, r, rowscale):
    """A tree the fragment epilogue takes whole: 16-bit output, a row vector, a column vector, an
    (M, N) input, and row, column and whole-tile reductions (AMIN carried negated)."""
    y = accum * rowscale + bias + r
    y_rowsum = ops.sum(y, over="N")
    y_colmax = ops.amax(y, over="M")
    y_min = ops.amin(y, over=("M", "N"))
    return y, y_rowsum, y_colmax, y_min


def ln_backward(accum, g, x):
    """The shape of BERT's LayerNorm backward: two (M, N) inputs (two aux stages per tile when they
    go through the sm_90a kernel's ring) and two column sums."""
    dx = accum * g + x
    dgamma = ops.sum(dx * g, over="M")
    dbeta = ops.sum(g, over="M")
    return dx, dgamma, dbeta


def _ints(rng, shape, dt):
    return rng.integers(-2, 3, shape).astype(np.float32).astype(DTYPES[dt])


def bce_uturn(accum, bias, t):
    """XML-CNN's forward kernel after the U-turn (bench/train.py): logits y, the BCE-with-logits
    loss summed whole, the loss's gradient s = sigmoid(y) - t stored 16-bit and summed over M
    (the bias gradient); the targets t are an fp32 (M, N) input."""
    y = accum * 0.125 + bias
    s = ops.sigmoid(y) - t
    loss = ops.relu(y) - y * t + ops.log(1.0 + ops.exp(-ops.abs(y)))
    loss = ops.sum(loss, over=("M", "N"))
    grad_bias = ops.sum(s, over="M")
    return s, loss, grad_bias


def case(name, L, M, N, K, ab="float16", out="float16", col_major_aux=False, seed=0):
    """(tree, A, B, inputs): the epilogue `name` at problem (L, M, N, K); L=0 means rank-2."""
    rng = np.random.default_rng(seed)
    lead = (L,) if L else ()
    acc = np.empty(lead + (M, N), np.float32)
    A, B = _ints(rng, lead + (M, K), ab), _ints(rng, lead + (K, N), ab)
    if name == "bias_relu_stats":
        C = _ints(rng, lead + (M, N), "float32")
        if col_major_aux:
            C = np.asfortranarray(C) if not L else np.ascontiguousarray(C.transpose(0, 2, 1)).transpose(0, 2, 1)
        inputs = {"C": C, "alpha": 0.5, "bias": _ints(rng, (N,), "float32")}
        ex = {"accum": acc, **inputs, "D": np.empty(lead + (M, N), DTYPES[out]), "F": np.empty(lead + (M, N), np.float32),
              "F_colmax": np.empty(lead + (N,), np.float32), "F_rowsum": np.empty(lead + (M,), DTYPES[out]),
              "D_min": np.empty(lead if L else (), np.float32)}
        fn = bias_relu_stats
    elif name == "activations":
        inputs = {"rowscale": _ints(rng, lead + (M, 1), "float16") + np.float16(3),
                  "colbias": _ints(rng, (N,), "float32")}
        ex = {"accum": acc, **inputs, "out": np.empty(lead + (M, N), DTYPES[out])}
        fn = activations
    elif name == "dgelu":
        # z on a quarter grid over [-4, 4): both terms of gelu' matter there
        inputs = {"z": (rng.integers(-16, 16, lead + (M, N)) / 4).astype(DTYPES[out])}
        ex = {"accum": acc, **inputs, "dz": np.empty(lead + (M, N), DTYPES[out])}
        fn = dgelu
    elif name == "stats":
        inputs = {"bias": _ints(rng, (N,), "float32"), "r": _ints(rng, lead + (M, N), out),
                  "rowscale": _ints(rng, lead + (M, 1), "float16") + np.float16(3)}
        ex = {"accum": acc, **inputs, "y": np.empty(lead + (M, N), DTYPES[out]),
              "y_rowsum": np.empty(lead + (M,), np.float32), "y_colmax": np.empty(lead + (N,), np.float32),
              "y_min": np.empty(lead if L else (), np.float32)}
        fn = stats
    elif name == "ln_backward":
        inputs = {"g": _ints(rng, lead + (M, N), out), "x": _ints(rng, lead + (M, N), out)}
        ex = {"accum": acc, **inputs, "dx": np.empty(lead + (M, N), DTYPES[out]),
              "dgamma": np.empty(lead + (N,), np.float32), "dbeta": np.empty(lead + (N,), np.float32)}
        fn = ln_backward
    elif name == "means":
        assert L, "means reduces over L"
        inputs = {"aux": _ints(rng, (1, M, N), "float32")}
        ex = {"accum": acc, **inputs, "y": np.empty(lead + (M, N), DTYPES[out]), "y_colmean": np.empty((L, N), np.float32),
              "y_rowmean": np.empty((L, M), DTYPES[out]), "y_batchsum": np.empty((M, N), np.float32),
              "y_all": np.empty((), np.float32)}
        fn = means
    elif name == "bce_uturn":
        inputs = {"bias": _ints(rng, (N,), out), "t": (rng.random(lead + (M, N)) < 0.3).astype(np.float32)}
        ex = {"accum": acc, **inputs, "s": np.empty(lead + (M, N), DTYPES[out]),
              "loss": np.empty(lead if L else (), np.float32), "grad_bias": np.empty(lead + (N,), np.float32)}
        fn = bce_uturn
    else:
        raise KeyError(name)
    return evt_core.trace(fn, ex), A, B, inputs


def compare(out, ref, what):
    """Tolerances of toolchain-notes §5.1 (inputs are exact integers, so only the epilogue's own
    rounding and libdevice ulps remain, and a reduction's summation order: reassociation_atol);
    NaN must match NaN."""
    full = max(np.asarray(r).size for r in ref.values())
    for name, r in ref.items():
        got = np.asarray(out[name]).astype(np.float32)
        r = np.asarray(r).astype(np.float32)
        assert got.shape == r.shape, f"{what}: {name} shape {got.shape} != {r.shape}"
        dt = str(np.asarray(out[name]).dtype)
        rtol = {"float32": 2e-5, "float16": 1e-3, "bfloat16": 1.6e-2}[dt]
        ok = np.isclose(got, r, rtol=rtol, atol=1e-4 + reassociation_atol(r, full), equal_nan=True)
        if not ok.all():
            bad = np.argwhere(~ok)[:5]
            raise AssertionError(f"{what}: {name} differs at {bad.tolist()}: got {got[tuple(bad[0])]}, "
                                 f"want {r[tuple(bad[0])]} ({(~ok).sum()} of {ok.size})")


def relayout(layout, A, B):
    """A and B in the operand layout a GPU layout test names: 'shared_A' (one A for every
    batch), 'A_colmajor' (M-contiguous A), 'B_colmajor' (K-contiguous B); others unchanged."""
    if layout == "shared_A":
        A = A[0]
    if layout == "A_colmajor":
        A = np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)
    if layout == "B_colmajor":
        B = np.ascontiguousarray(B.transpose(0, 2, 1)).transpose(0, 2, 1)
    return A, B
