"""The shared tanh-form GELU spellings (backends/gpu/gelu_tanh.py): their float32 emulation
against float64, special values as the op table gives them, and both backends spelling them."""
import numpy as np
import pytest

from evt_core.tree.ops import ELEMENTWISE, Op
from evt_backends.gpu import gelu_tanh as G

_K, _A = 0.7978845608028654, 0.044715


def _exact(x):
    """float64 gelu_tanh and its derivative through sigmoid(2u), free of cancellation."""
    x = x.astype(np.float64)
    with np.errstate(over="ignore"):
        s = 1.0 / (1.0 + np.exp(-2.0 * _K * (x + _A * x ** 3)))
    return x * s, s + 2.0 * _K * x * (1.0 + 3.0 * _A * x * x) * s * (1.0 - s)


@pytest.mark.parametrize("name, emulated", [("gelu_tanh", G.gelu_tanh_emulated),
                                            ("gelu_tanh_grad", G.gelu_tanh_grad_emulated)])
def test_error_against_float64_is_within_bounds_and_below_the_op_tables(name, emulated):
    x = np.linspace(-12, 12, 1_200_001, dtype=np.float32)
    exact = dict(zip(("gelu_tanh", "gelu_tanh_grad"), _exact(x)))[name]
    op = Op.GELU_TANH if name == "gelu_tanh" else Op.GELU_TANH_GRAD
    with np.errstate(all="ignore"):
        ours, table = emulated(x).astype(np.float64), ELEMENTWISE[op].fn(x).astype(np.float64)
    abs_bound, rel_bound = G.ERROR_BOUNDS[name]
    big = np.abs(exact) > 1e-3
    for got, bound_scale in ((ours, 1.0), (table, None)):
        err = np.abs(got - exact)
        rel = (err / np.abs(exact))[big].max()
        if bound_scale is not None:
            assert err.max() < abs_bound and rel < rel_bound, (name, err.max(), rel)
        else:
            table_rel = rel
    ours_rel = (np.abs(ours - exact) / np.abs(exact))[big].max()
    assert ours_rel < table_rel / 10      # the new spelling is the more accurate of the two


@pytest.mark.parametrize("emulated, op", [(G.gelu_tanh_emulated, Op.GELU_TANH),
                                          (G.gelu_tanh_grad_emulated, Op.GELU_TANH_GRAD)])
def test_special_values_match_the_op_table(emulated, op):
    """0, -0, the fp16 extremes, huge fp32 values, +-inf and NaN give what the op table gives
    (past V_MAX: x * 0, so -inf gives NaN as 0.5 * x * (1 + t) does)."""
    x = np.array([0.0, -0.0, 65504.0, -65504.0, 1e13, -1e13, -30.0, np.inf, -np.inf, np.nan], np.float32)
    with np.errstate(all="ignore"):
        got, want = emulated(x), ELEMENTWISE[op].fn(x)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    np.testing.assert_allclose(got[ok], want[ok], rtol=1e-6, atol=1e-30)


def test_both_backends_spell_the_shared_form():
    """The accurate spellings are the one-ex2, one-rcp form with gelu_tanh.py's constants, not
    libdevice's tanhf."""
    from evt_backends.cupy.codegen import spelling as cupy_spelling
    from evt_backends.numba_cuda.codegen import devicefns, spelling as numba_spelling
    helpers = cupy_spelling.MATH_HELPERS
    body = helpers[helpers.index("float evt_sigmoid_2u("):helpers.index("evt_phi_accurate")]
    assert "ex2.approx" in body and "rcp.approx" in body and "tanhf" not in body and "tanh.approx" not in body
    assert "evt_sigmoid_2u(x" in body[body.index("float evt_gelu_tanh_grad("):]
    assert "f_tanh" not in numba_spelling.SPELLING[Op.GELU_TANH]
    import inspect
    src = inspect.getsource(devicefns.gelu_tanh_grad.py_func)
    assert "ex2_approx" in src and "rcp_approx" in src and "math.tanh" not in src
