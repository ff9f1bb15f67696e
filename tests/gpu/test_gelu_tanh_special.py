"""The tanh-form GELU and its derivative (backends/gpu/gelu_tanh.py's spelling) on the GPU,
against the op table: a dense sweep of [-12, 12] and the special values (signed zeros, the
fp16 extremes, huge fp32 values, -30 past the clamp, +-inf, NaN) through both backends'
accurate spellings (fast_math=False), fp32 and fp16 outputs; numba also with
sm90_epilogue="fragment" (on sm_90 its fragment epilogue takes the fp16 case, which "auto"
gives the staged one: the unrolled-libdevice rule of select.sm90_fragment)."""
import numpy as np
import pytest

import evt_core
from evt_core import ops

pytestmark = pytest.mark.gpu

SPECIALS = np.array([0.0, -0.0, 65504.0, -65504.0, 1e13, -1e13, -30.0, -8.7, 8.7, np.inf, -np.inf, np.nan],
                    np.float32)
M, N, K = 64, 256, 16


def _backend_or_skip(name):
    ok = evt_core.backends().get(name)         # a Support: falsy with its reason when unavailable
    if not ok:
        pytest.skip(f"{name}: {getattr(ok, 'reason', 'not registered')}")


def _epilogue(accum, r):
    z = accum + r
    return {"D": ops.gelu_tanh(z), "G": ops.gelu_tanh_grad(z)}


def _inputs():
    """Zero A and B (accum is exactly 0, so z = r) and r: the sweep, then the special values."""
    r = np.linspace(-12, 12, M * N, dtype=np.float32)
    r[:len(SPECIALS)] = SPECIALS
    A, B = np.zeros((M, K), np.float16), np.zeros((K, N), np.float16)
    return A, B, r.reshape(M, N)


def _host(x):
    return x.get() if hasattr(x, "get") else np.asarray(x.copy_to_host() if hasattr(x, "copy_to_host") else x)


@pytest.mark.parametrize("backend,opts", [("numba_cuda", {}), ("numba_cuda", {"sm90_epilogue": "fragment"}),
                                          ("cupy", {})], ids=["numba", "numba-fragment", "cupy"])
@pytest.mark.parametrize("out", ["float32", "float16"])
def test_gelu_tanh_and_its_derivative_match_the_op_table(backend, opts, out):
    _backend_or_skip(backend)
    A, B, r = _inputs()
    example = {"accum": np.empty((M, N), np.float32), "r": r,
               "D": np.empty((M, N), out), "G": np.empty((M, N), out)}
    tree = evt_core.trace(_epilogue, example)
    kern = evt_core.compile(tree, backend=backend, fast_math=False, **opts)
    got = {k: _host(v).astype(np.float32) for k, v in kern(A, B, r=r).items()}
    with np.errstate(all="ignore"):
        ref = {k: np.asarray(v, np.float32) for k, v in evt_core.interpret(tree, A, B, r=r).items()}
    for name in ("D", "G"):
        g, w = got[name], ref[name]
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=f"{backend} {out} {name}: NaN positions")
        ok = ~np.isnan(w)
        big = ok & np.isinf(w)                        # 1e13 overflows fp16: the same infinity
        np.testing.assert_array_equal(g[big], w[big], err_msg=f"{backend} {out} {name}: infinities")
        ok &= ~big
        # the op table's own float32 formulas are off by up to 9e-5 (gelu_tanh) and 4e-4 (its
        # derivative) relative and 1.2e-6 absolute (gelu_tanh.py), the device form by less; an
        # fp16 result adds its rounding (2^-11 relative, one ulp either way)
        rtol = 5e-4 if out == "float32" else 2e-3
        np.testing.assert_allclose(g[ok], w[ok], rtol=rtol, atol=3e-6, err_msg=f"{backend} {out} {name}")
