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
