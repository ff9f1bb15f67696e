import pytest

from evt_core.errors import TraceError
from evt_core.program import Operand
from evt_core.tree.ir import Node
from evt_core.tree.ops import Op
from evt_core.tree.passes.dead_stores import eliminate_dead_stores
from tests.core.passes.common import f32, raw


def test_store_that_is_not_an_output_is_replaced_by_its_input():
    def expected(accum):
        return {"D": accum * 2.0}
    t = raw(expected, D=f32((4, 6)))
    (store,) = t.roots
    value = store.src[0]
    tmp = Node(Op.STORE, (value,), Operand("tmp", "float32", (), (), (), (4, 6)), value.shape)
    before = t.replace(roots=(store.replace(src=(tmp,)),))
    assert eliminate_dead_stores(before).roots == t.roots


def test_output_stored_twice_is_an_error():
    def fn(accum):
        return {"D": accum}
    t = raw(fn, D=f32((4, 6)))
    (store,) = t.roots
    other = store.replace(src=(Node(Op.NEG, store.src, shape=store.shape),))
    with pytest.raises(TraceError, match="stored 2 times"):
        eliminate_dead_stores(t.replace(roots=(store, other)))
