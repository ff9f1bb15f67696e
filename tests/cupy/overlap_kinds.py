"""The epilogue kinds the overlapped cooperative schedule (codegen/sm90_overlap.py) is checked
on, as traced trees: one definition for the CPU checks (tests/cupy/test_sm90_overlap.py: refusal,
ring invariant, nvcc + SASS) and the GPU ones (tests/gpu/test_cupy_overlap.py: results).

Each entry: name -> (epilogue function, example builder (L, M, N, dtype) -> (inputs, outputs)),
the inputs as NumPy arrays or scalars, the outputs as empty arrays of their dtype and shape."""
import numpy as np

import evt_core
from evt_core import ops
from evt_core.dtypes import DTYPES


def gelu_backward(accum, z):
    """BERT's GELU backward: the erf form's derivative at z (an (M, N) fp16 input, through the
    ring) times the accumulator, and its column sum (the bias gradient)."""
    dz = accum * ops.gelu_grad(z)
    dbias = ops.sum(dz, over="M")
    return dz, dbias


def ffn_forward(accum, bias):
    """BERT's FFN forward: a bias handed from tile to tile, two 16-bit outputs."""
    z = accum + bias
    act = ops.gelu(z)
    return z, act


def ln_backward(accum, g, x):
    """LayerNorm-backward-like: two (M, N) inputs (both read whole by the first piece), two row
    sums."""
    dx = accum * g + x
    s1 = ops.sum(dx, over="N")
    s2 = ops.sum(dx * g, over="N")
    return dx, s1, s2


def bare(accum):
    """The bare GEMM: one 16-bit output, nothing else."""
    D = accum
    return D


def three_inputs(accum, g, x, y):
    """Three (M, N) inputs: their aux stages stay held through the epilogue, so the pieces are
    cut to what the ring fills beside them."""
    D = accum * g + x * y
    return D


def fp32_row_max(accum):
    """An fp32 output (stored per pair, no TMA staging) and a row maximum."""
    s = 0.125 * accum
    s_rowmax = ops.amax(s, over="N")
    return s, s_rowmax


def reductions(accum, scale):
    """A row vector (scale[M]) and every reduction kind: row, column (a MEAN), whole-tile."""
    v = accum * scale
    row_sum = ops.sum(v, over="N")
    col_mean = ops.mean(v, over="M")
    vmax = ops.amax(v, over=("M", "N"))
    row_min = ops.amin(v, over="N")
    return v, row_sum, col_mean, vmax, row_min


def _mn(L, M, N):
    return (L, M, N) if L > 1 else (M, N)


def _vals(rng, shape, dt, scale=0.5):
    return (rng.standard_normal(shape).astype(np.float32) * scale).astype(DTYPES[dt])


def example(name, L, M, N, dt, rng):
    """(inputs, outputs) of kind `name` for an L x M x N call (L > 1: batched)."""
    mn, red = _mn(L, M, N), (lambda *s: np.empty(((L,) if L > 1 else ()) + s, np.float32))
    half = lambda shape: np.empty(shape, DTYPES[dt])     # noqa: E731
    if name == "gelu_backward":
        return {"z": _vals(rng, mn, dt, 1.5)}, {"dz": half(mn), "dbias": red(N)}
    if name == "ffn_forward":
        return {"bias": _vals(rng, (N,), dt)}, {"z": half(mn), "act": half(mn)}
    if name == "ln_backward":
        return {"g": _vals(rng, mn, dt), "x": _vals(rng, mn, dt)}, {"dx": half(mn), "s1": red(M), "s2": red(M)}
    if name == "bare":
        return {}, {"D": half(mn)}
    if name == "three_inputs":
        return {k: _vals(rng, mn, dt) for k in "gxy"}, {"D": half(mn)}
    if name == "fp32_row_max":
        return {}, {"s": np.empty(mn, np.float32), "s_rowmax": red(M)}
    assert name == "reductions", name
    scale = _vals(rng, ((L, M, 1) if L > 1 else (M, 1)), dt)
    col_mean = np.empty(((L,) if L > 1 else ()) + (N,), DTYPES[dt])
    return {"scale": scale}, {"v": half(mn), "row_sum": red(M), "col_mean": col_mean, "vmax": red(), "row_min": red(M)}


KINDS = {"gelu_backward": gelu_backward, "ffn_forward": ffn_forward, "ln_backward": ln_backward, "bare": bare,
         "three_inputs": three_inputs, "fp32_row_max": fp32_row_max, "reductions": reductions}


def tree(name, L=1, M=256, N=256, dt="float16", rng=None):
    """(traced tree, inputs) of kind `name` at this shape."""
    inputs, outputs = example(name, L, M, N, dt, rng or np.random.default_rng(0))
    acc = np.empty(_mn(L, M, N), np.float32)
    return evt_core.trace(KINDS[name], {"accum": acc, **inputs, **outputs}), inputs
