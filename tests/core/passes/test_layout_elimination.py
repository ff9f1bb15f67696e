import numpy as np
import pytest

from evt_core import ops
from evt_core.errors import UnsupportedError
from evt_core.tree.ops import LAYOUT, Op
from evt_core.tree.passes.layout_elimination import eliminate_layout
from tests.core.passes.common import f32, raw


def loads(tree):
    return [n for n in tree.nodes() if n.op is Op.LOAD]


def test_permuted_input_becomes_a_load_view():
    def before(accum, Ct):
        return {"D": accum + ops.permute(Ct, (1, 0))}
    after = eliminate_layout(raw(before, Ct=f32((6, 4)), D=f32((4, 6))))
    assert not any(n.op in LAYOUT for n in after.nodes())
    (ld,) = loads(after)
    assert ld.arg.view == (("permute", (1, 0)),) and ld.shape == (4, 6)


def test_permuted_output_becomes_a_store_view():
    def before(accum, b):
        return {"Dt": ops.permute(accum * b, (1, 0))}
    after = eliminate_layout(raw(before, b=f32((6,)), Dt=f32((6, 4))))
    (store,) = after.roots
    assert store.arg.view == (("permute", (1, 0)),)
    assert store.src[0].op is Op.MUL and store.src[0].shape == (4, 6)


def test_layout_through_an_elementwise_op_reaches_both_loads():
    def before(accum, P, Q):
        return {"D": accum * ops.reshape(P + Q, (4, 6))}
    after = eliminate_layout(raw(before, P=f32((24,)), Q=f32((24,)), D=f32((4, 6))))
    assert [ld.arg.view for ld in loads(after)] == [(("reshape", (4, 6)),)] * 2


def test_accumulator_in_two_layouts_is_refused():
    def before(accum):
        return {"D": ops.permute(accum, (1, 0)) * accum}
    from evt_core.tree.outputs import make_tree
    t = make_tree(before, {"accum": np.empty((4, 4), np.float32), "D": f32((4, 4))})
    with pytest.raises(UnsupportedError, match="different layouts"):
        eliminate_layout(t)


@pytest.mark.parametrize("layout,v_shape,out_shape", [
    (lambda x: ops.reshape(x, (24,)), (24,), (24,)),      # a full vector meets the flattened accumulator
    (lambda x: ops.reshape(x, (24,)), (1,), (24,)),       # a broadcast one
    (lambda x: ops.permute(x, (1, 0)), (4,), (6, 4)),     # a row vector of the transposed frame
])
def test_operands_meeting_a_laid_out_accumulator_are_laid_out_back(layout, v_shape, out_shape):
    import evt_core
    rng = np.random.default_rng(0)
    v = rng.standard_normal(v_shape).astype(np.float32)
    A, B = rng.integers(-2, 3, (4, 3)).astype(np.float32), rng.integers(-2, 3, (3, 6)).astype(np.float32)
    t = evt_core.trace(lambda accum, v: {"D": layout(accum) + v},
                       {"accum": np.empty((4, 6), np.float32), "v": v, "D": np.empty(out_shape, np.float32)})
    assert not any(n.op in LAYOUT for n in t.nodes())
    acc = A @ B
    expect = (acc.reshape(24) if out_shape == (24,) else acc.T) + v
    np.testing.assert_array_equal(evt_core.interpret(t, A, B, v=v)["D"], expect)
