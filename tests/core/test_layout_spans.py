"""Layout ops against the kernel contract, on the CPU: for every case of tests/layout_cases.py at
sizes of several tiles, every axis on which a bound operand has a nonzero frame stride is an
axis the Program says it spans (a kernel indexes only spanned axes, so a missing one is a wrong
result: the GPU backends once wrote a reshaped output only at (0, 0, 0)). Also the NumPy
backend's results for the same calls, through the same binding."""
import numpy as np
import pytest

import evt_core
from evt_core.bind import bind, numpy_alloc
from evt_core.tree.lower import lower
from tests import layout_cases

SIZES = [(6, 264, 136, 24), (6, 72, 520, 16)]       # L ignored by unbatched cases


@pytest.mark.parametrize("name,L", layout_cases.instances())
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
def test_bound_strides_within_spans(name, L, size):
    _, M, N, K = size
    tree, A, B, inputs = layout_cases.build(name, L, M, N, K)
    p = lower(tree)
    b = bind(p, A, B, inputs, numpy_alloc)
    for what, ops_, tensors in (("input", p.inputs, b.inputs), ("output", p.outputs, b.outputs)):
        for op, t in zip(ops_, tensors):
            spans = p.spans(op)
            for axis, s, stride in zip("LMN", spans, t.strides):
                assert s or stride == 0, f"{what} {op.name}: stride {stride} on {axis} but spans={spans}"


@pytest.mark.parametrize("name,L", layout_cases.instances())
def test_numpy_backend_matches_reference(name, L, monkeypatch):
    monkeypatch.setenv("EVT_POISON", "1")
    tree, A, B, inputs = layout_cases.build(name, L, 40, 24, 8)
    got = evt_core.compile(tree, backend="numpy")(A, B, **inputs)
    layout_cases.check(got, evt_core.interpret(tree, A, B, **inputs), f"{name} L={L}")


def test_reshape_of_transposed_input_binds_a_frame_copy():
    tree, A, B, inputs = layout_cases.build("reshaped_permuted_in", 6, 16, 8, 8)
    p = lower(tree)
    b = bind(p, A, B, inputs, numpy_alloc)
    (t,) = b.inputs
    assert t.array.shape == (6, 16, 8) and t.strides == (128, 8, 1)
    C = inputs["C"]
    want = C.transpose(2, 1, 0).reshape(6, 16, 8)
    assert np.array_equal(t.array, want)


def test_output_layout_no_strides_express_is_refused_at_trace_time():
    """A head split (reshape, permute) of the accumulator stored as its own array: reading it
    back as the (M, N) frame would merge permuted dims, so no strides write it."""
    from evt_core import ops
    from evt_core.errors import UnsupportedError

    def epi(accum):
        return {"o": ops.permute(ops.reshape(accum, (2, 8, 3, 4)), (0, 2, 1, 3))}
    with pytest.raises(UnsupportedError, match="'o'.*no strides can express"):
        evt_core.trace(epi, {"accum": np.empty((16, 12), np.float32), "o": np.empty((2, 3, 8, 4), np.float16)})


def test_layouts_that_undo_each_other_leave_the_accumulator_layout():
    """view -> op -> view back (torch's (B*S, H) -> (B, S, H) -> (B*S, H)) and a permute pair
    cancel: the output needs no view and a reduction of the result is legal."""
    from evt_core import ops

    def epi(accum, b):
        y = ops.reshape(ops.relu(ops.reshape(accum, (2, 16, 8)) + b), (32, 8))
        z = ops.permute(ops.permute(accum, (1, 0)) * 2.0, (1, 0))
        return {"D": y, "S": ops.sum(y, over="M"), "Z": z}
    ex = {"accum": np.empty((32, 8), np.float32), "b": np.ones((8,), np.float32), "D": np.empty((32, 8), np.float16),
          "S": np.empty((8,), np.float32), "Z": np.empty((32, 8), np.float32)}
    tree = evt_core.trace(epi, ex)
    p = lower(tree)
    assert all(not any(k in ("reshape", "permute") for k, _ in o.view) for o in p.outputs)
    rng = np.random.default_rng(1)
    A = rng.integers(-2, 3, (32, 4)).astype(np.float16)
    B = rng.integers(-2, 3, (4, 8)).astype(np.float16)
    got = evt_core.interpret(tree, A, B, b=ex["b"])
    acc = A.astype(np.float32) @ B.astype(np.float32)
    assert np.array_equal(got["S"], np.maximum(acc + 1, 0).sum(0))
    assert np.array_equal(got["Z"], acc * 2)


def test_bind_uploads_numpy_inputs_after_their_layout_checks():
    """A backend that moves NumPy inputs to its device (upload=) gets the frame-shaped copy of a
    layout no strides express, and frame strides read off the uploaded array."""
    uploads = []

    def upload(x, what):
        uploads.append((what, x.shape))
        return np.ascontiguousarray(x)          # a stand-in device array (C order, like cupy.asarray)
    tree, A, B, inputs = layout_cases.build("reshaped_permuted_in", 6, 16, 8, 8)
    b = bind(lower(tree), A, B, inputs, numpy_alloc, upload=upload)
    assert uploads == [("input 'C'", (6, 16, 8))]
    assert b.inputs[0].strides == (128, 8, 1)
    assert np.array_equal(b.inputs[0].array, inputs["C"].transpose(2, 1, 0).reshape(6, 16, 8))
