"""The public API as the issue states it: tracing forms, interpret, compile, backends."""
import numpy as np

import evt_core
from evt_core import ops

from tests.core.helpers import empty, gemm, ints, normal

L, M, N, K = 2, 5, 7, 3


def issue_example():
    def epi(accum, C, alpha, bias):
        F = alpha * accum + C
        D = ops.relu(F + bias) + 1.0
        F_colmax = ops.amax(F, over="M")
        return D, F, F_colmax
    C, bias = normal((L, M, N), np.float16), normal((N,))
    tree = evt_core.trace(epi, {"accum": empty((L, M, N)), "C": C, "alpha": 0.5, "bias": bias,
                                "D": empty((L, M, N), np.float16), "F": empty((L, M, N), np.float16),
                                "F_colmax": empty((L, N))})
    return tree, C, bias


def test_issue_example_matches_numpy():
    tree, C, bias = issue_example()
    A, B = ints((L, M, K)), ints((K, N))
    out = evt_core.interpret(tree, A, B, C=C, alpha=0.5, bias=bias)
    F = 0.5 * gemm(A, B) + C.astype(np.float64)
    assert list(out) == ["D", "F", "F_colmax"]
    assert out["D"].dtype == np.float16 and out["D"].shape == (L, M, N)
    np.testing.assert_allclose(out["F"], F, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out["D"], np.maximum(F + bias, 0) + 1, rtol=1e-3, atol=1e-3)
    np.testing.assert_allclose(out["F_colmax"], F.max(axis=1), rtol=1e-6)


def test_compile_numpy_backend_same_results_and_cached():
    tree, C, bias = issue_example()
    A, B = ints((L, M, K)), ints((L, K, N))
    kernel = evt_core.compile(tree, backend="numpy")
    assert evt_core.compile(tree, backend="numpy") is kernel
    ref = evt_core.interpret(tree, A, B, C=C, alpha=0.5, bias=bias)
    got = kernel(A, B, C=C, alpha=0.5, bias=bias)
    assert got.keys() == ref.keys()
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])


def test_same_tree_runs_at_other_extents():
    tree, _, _ = issue_example()
    A, B = ints((3, 9, 4)), ints((3, 4, 11))
    C, bias = normal((3, 9, 11), np.float16), normal((11,))
    out = evt_core.interpret(tree, A, B, C=C, alpha=2.0, bias=bias)
    assert out["D"].shape == (3, 9, 11) and out["F_colmax"].shape == (3, 11)
    F = 2.0 * gemm(A, B) + C
    np.testing.assert_allclose(out["F_colmax"], F.max(axis=1), rtol=1e-6)


def test_reassignment_and_integer_literals():
    def epi(accum):
        x = accum * 2
        x = x + 1          # reassigned: ordinary Python semantics
        return x
    # the returned name is `x`
    t = evt_core.trace(epi, {"accum": empty((M, N)), "x": empty((M, N))})
    A, B = ints((M, K)), ints((K, N))
    np.testing.assert_array_equal(evt_core.interpret(t, A, B)["x"], gemm(A, B) * 2 + 1)


def test_lambda_and_exec_defined_functions_with_dict_return():
    lam = lambda accum, b: {"D": ops.sigmoid(accum + b)}  # noqa: E731
    ns = {}
    exec("def gen(accum, b):\n    return {'D': accum - b}", {"ops": ops}, ns)
    A, B, b = ints((M, K)), ints((K, N)), normal((N,))
    for fn, expect in ((lam, 1 / (1 + np.exp(-(gemm(A, B) + b)))), (ns["gen"], gemm(A, B) - b)):
        t = evt_core.trace(fn, {"accum": empty((M, N)), "b": b, "D": empty((M, N))})
        np.testing.assert_allclose(evt_core.interpret(t, A, B, b=b)["D"], expect, rtol=1e-6, atol=1e-6)


def test_return_accum_itself_alias_and_reuse_after_return():
    def epi(accum, bias):
        F = accum + bias
        G = F * 3.0          # a returned value used later sees its fp32 value
        return {"acc": accum, "F": F, "F2": F, "G": G}
    A, B, bias = ints((M, K)), ints((K, N)), normal((N,))
    t = evt_core.trace(epi, {"accum": empty((M, N)), "bias": bias, "acc": empty((M, N)),
                             "F": empty((M, N), np.float16), "F2": empty((M, N)), "G": empty((M, N))})
    out = evt_core.interpret(t, A, B, bias=bias)
    F = (gemm(A, B) + bias).astype(np.float32)
    np.testing.assert_array_equal(out["acc"], gemm(A, B))
    np.testing.assert_array_equal(out["F"], F.astype(np.float16))
    np.testing.assert_array_equal(out["F2"], F)
    np.testing.assert_array_equal(out["G"], F * np.float32(3))   # not the fp16-rounded F


def test_unused_parameters_are_accepted():
    def epi(accum, unused, s):
        return {"D": accum}
    t = evt_core.trace(epi, {"accum": empty((M, N)), "unused": normal((M, N)), "s": 1.0, "D": empty((M, N))})
    A, B = ints((M, K)), ints((K, N))
    out = evt_core.compile(t, backend="numpy")(A, B, unused=normal((M, N)), s=2.0)
    np.testing.assert_array_equal(out["D"], gemm(A, B))


def test_tensorspec_strides_give_column_major_aux_and_output():
    def epi(accum, C):
        return {"D": accum + C}
    spec = evt_core.TensorSpec((M, N), "float32", strides=(1, M))
    t = evt_core.trace(epi, {"accum": evt_core.TensorSpec((M, N), "float32"), "C": spec,
                             "D": evt_core.TensorSpec((M, N), "float16", strides=(1, M))})
    (load,) = t.program.inputs
    assert load.order == (1, 0) and t.program.outputs[0].order == (1, 0)
    A, B, C = ints((M, K)), ints((K, N)), np.asfortranarray(normal((M, N)))
    out = evt_core.interpret(t, A, B, C=C)
    assert out["D"].flags.f_contiguous
    np.testing.assert_allclose(out["D"], gemm(A, B) + C, rtol=1e-3)


def test_backends_lists_numpy_available_and_reasons():
    b = evt_core.backends()
    assert b["numpy"].ok
    for name, s in b.items():
        assert s.ok or s.reason, name


def test_pow_forms():
    def epi(accum):
        return {"D": accum ** 2 + abs(accum) ** 0.5}
    t = evt_core.trace(epi, {"accum": empty((M, N)), "D": empty((M, N))})
    A, B = ints((M, K)), ints((K, N))
    g = gemm(A, B)
    np.testing.assert_allclose(evt_core.interpret(t, A, B)["D"], g * g + np.sqrt(np.abs(g)), rtol=1e-6)


def test_kernel_exposes_stages_and_dump(tmp_path, monkeypatch):
    monkeypatch.setenv("EVT_DUMP", str(tmp_path))
    def epi(accum):
        return {"Z": ops.tanh(accum)}
    t = evt_core.trace(epi, {"accum": empty((3, 4)), "Z": empty((3, 4))})
    k = evt_core.compile(t, backend="numpy")
    assert "tanh" in k.stages["program"]
    assert any(p.name.endswith(".program.txt") for p in tmp_path.iterdir())


def test_a_negative_stride_on_a_one_element_axis_is_made_positive_without_a_copy():
    """x[:, ::-1] of an (M, 1) column: NumPy flags it contiguous, so a copy would not change
    its (4, -4) strides, which a device mirror cannot address (numba_cuda refused it, naming no
    input). The one-element axis reads no stride: its magnitude is given instead."""
    import numpy as np

    from evt_core.call import _plain
    c = np.arange(4, dtype=np.float32).reshape(4, 1)[:, ::-1]
    assert c.strides == (4, -4)
    got = _plain(c)
    assert got.strides == (4, 4) and np.shares_memory(got, c) and np.array_equal(got, c)
    ro = c.copy()[:, ::-1]
    ro.flags.writeable = False
    assert not _plain(ro).flags.writeable
