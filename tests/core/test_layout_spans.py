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
