"""Every bad input gets a typed error that names the culprit."""
import numpy as np
import pytest

import evt_core
from evt_core import BackendNotFoundError, DTypeError, ShapeError, TraceError, UnsupportedError, ops
from tests.core.helpers import empty, ints, normal

M, N, K = 4, 6, 3
ACC = empty((M, N))


def trace(fn, **ex):
    return evt_core.trace(fn, {"accum": ACC, **ex})


def test_no_accum_parameter():
    def epi(x):
        return {"D": x}
    with pytest.raises(TraceError, match="no `accum` parameter"):
        evt_core.trace(epi, {"x": ACC, "D": ACC})


def test_name_used_but_not_defined():
    def epi(accum):
        return {"D": accum + undefined_bias}  # noqa: F821
    with pytest.raises(TraceError, match="undefined_bias"):
        trace(epi, D=ACC)


def test_missing_example_for_parameter_and_output():
    def epi(accum, bias):
        return {"D": accum + bias}
    with pytest.raises(TraceError, match="'bias'"):
        trace(epi, D=ACC)
    with pytest.raises(TraceError, match="output 'D'"):
        trace(epi, bias=normal((N,)))


def test_returned_expression_without_a_name():
    def epi(accum):
        D = accum * 2
        return D, ops.relu(accum)
    with pytest.raises(TraceError, match=r"returned expression #1 `ops.relu\(accum\)` has no name"):
        trace(epi, D=ACC)


@pytest.mark.parametrize("bad", [[1, 2], "text", None])
def test_non_tree_return(bad):
    def epi(accum):
        return {"D": bad}
    with pytest.raises(TraceError, match="output 'D'"):
        trace(epi, D=ACC)


def test_shapes_that_do_not_broadcast_name_both_tensors():
    def epi(accum, u, v):
        return {"D": accum + u * v}
    with pytest.raises(ShapeError, match=r"u has shape \(5,\).*v has shape \(6,\)"):
        trace(epi, u=normal((5,)), v=normal((6,)), D=ACC)


def test_input_that_does_not_fit_the_problem():
    def epi(accum, C):
        return {"D": accum + C}
    with pytest.raises(ShapeError, match=r"\(3, 4, 6\)"):
        trace(epi, C=normal((3, M, N)), D=ACC)


def test_reduction_output_shape_must_match_over():
    def epi(accum):
        return {"r": ops.sum(accum, over="N")}
    with pytest.raises(ShapeError, match=r"'r' has shape \(6,\) but reducing over N gives \(4,\) or \(4, 1\)"):
        trace(epi, r=empty((N,)))


def test_plain_output_missing_an_axis_suggests_a_reduction():
    def epi(accum):
        return {"D": accum}
    with pytest.raises(ShapeError, match="'D'.*reduce"):
        trace(epi, D=empty((N,)))


def test_layout_no_node_kind_can_express():
    def epi(accum):
        return {"D": ops.permute(accum, (1, 0)) + accum}
    with pytest.raises(UnsupportedError, match=r"permute\(accum, \(1, 0\)\) \+ accum.*different layouts"):
        evt_core.trace(epi, {"accum": empty((M, M)), "D": empty((M, M))})


def test_layout_of_reduced_permuted_accumulator_is_refused_naming_the_node():
    def epi(accum):
        return {"r": ops.sum(ops.permute(accum, (1, 0)), over="N")}
    with pytest.raises(UnsupportedError, match="sum"):
        evt_core.trace(epi, {"accum": empty((M, M)), "r": empty((M,))})


def test_unknown_op():
    def epi(accum):
        return {"D": ops.softmax(accum)}
    with pytest.raises(TraceError, match="unknown op ops.softmax"):
        trace(epi, D=ACC)


def test_python_control_flow_on_traced_values():
    def epi(accum):
        return {"D": accum if accum > 0 else -accum}
    with pytest.raises(TraceError, match="ops.where"):
        trace(epi, D=ACC)


def test_reduction_result_cannot_be_consumed():
    def epi(accum):
        s = ops.sum(accum, over="N")
        return {"D": accum - s}
    with pytest.raises(TraceError, match="can only be returned"):
        trace(epi, D=ACC)


def test_bad_over_and_l_on_unbatched():
    def epi(accum):
        return {"r": ops.sum(accum, over="K")}
    with pytest.raises(TraceError, match="over must be"):
        trace(epi, r=empty((M,)))

    def epi2(accum):
        return {"r": ops.sum(accum, over="L")}
    with pytest.raises(ShapeError, match="no batch axis"):
        trace(epi2, r=ACC)


@pytest.fixture
def bias_tree():
    def epi(accum, bias):
        return {"D": accum + bias}
    return trace(epi, bias=normal((N,)), D=empty((M, N), np.float16))


def test_wrong_dtype_at_call_time(bias_tree):
    with pytest.raises(DTypeError, match="'bias'.*float64.*float32"):
        evt_core.interpret(bias_tree, ints((M, K)), ints((K, N)), bias=np.zeros(N))


def test_wrong_shape_at_call_time_names_input_and_both_shapes(bias_tree):
    with pytest.raises(ShapeError, match=r"'bias' has shape \(5,\) but the tree expects \(6,\)"):
        evt_core.interpret(bias_tree, ints((M, K)), ints((K, N)), bias=normal((5,)))


def test_missing_and_misspelled_inputs(bias_tree):
    with pytest.raises(ShapeError, match="missing input 'bias'"):
        evt_core.interpret(bias_tree, ints((M, K)), ints((K, N)))
    with pytest.raises(ShapeError, match="unexpected input 'bais'"):
        evt_core.interpret(bias_tree, ints((M, K)), ints((K, N)), bias=normal((N,)), bais=1.0)


@pytest.mark.parametrize("a,b", [((0, K), (K, N)), ((M, K), (K, 0)), ((M, 0), (0, N))])
def test_zero_extents(bias_tree, a, b):
    with pytest.raises(ShapeError, match="=0"):
        evt_core.interpret(bias_tree, np.zeros(a, np.float16), np.zeros(b, np.float16), bias=normal((b[1],)))


def test_mismatched_k_and_rank(bias_tree):
    with pytest.raises(ShapeError, match="K=3"):
        evt_core.interpret(bias_tree, ints((M, K)), ints((K + 1, N)), bias=normal((N,)))
    with pytest.raises(ShapeError, match="rank-2"):
        evt_core.interpret(bias_tree, ints((2, M, K)), ints((K, N)), bias=normal((N,)))


def test_unknown_backend_lists_registered(bias_tree):
    with pytest.raises(BackendNotFoundError, match="registered: .*numpy") as e:
        evt_core.compile(bias_tree, backend="numba-cuda")
    assert "did you mean 'numba_cuda'" in str(e.value) or "numba_cuda" not in e.value.available


def test_unknown_compile_option(bias_tree):
    with pytest.raises(UnsupportedError, match="no option 'tile'"):
        evt_core.compile(bias_tree, backend="numpy", tile=128)


def test_interpret_rejects_non_tree():
    with pytest.raises(TraceError, match="evt_core.trace"):
        evt_core.interpret(object(), ints((M, K)), ints((K, N)))
