from evt_core import ops
from evt_core.tree.passes.constant_folding import fold_constants
from tests.core.passes.common import f32, raw


def test_all_constant_subexpressions_fold_and_mul_by_one_disappears():
    def before(accum):
        return {"D": accum * (ops.exp(0.0) * 1.0) + ops.maximum(2.0, -1.0)}

    def expected(accum):
        return {"D": accum + 2.0}
    assert fold_constants(raw(before, D=f32((4, 6)))).roots == raw(expected, D=f32((4, 6))).roots


def test_add_zero_is_kept_for_signed_zero():
    def before(accum):
        return {"D": accum + 0.0}
    t = raw(before, D=f32((4, 6)))
    assert fold_constants(t).roots == t.roots
