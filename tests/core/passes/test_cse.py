from evt_core.tree.passes.cse import eliminate_common_subexpressions as cse
from tests.core.passes.common import f32, raw


def test_commuted_products_become_one_value():
    def before(accum, x):
        return {"D": accum * x + x * accum}

    def expected(accum, x):
        t = x * accum
        return {"D": t + t}
    ex = dict(x=f32((6,)), D=f32((4, 6)))
    after = cse(raw(before, **ex))
    assert after.roots == cse(raw(expected, **ex)).roots
    add = after.roots[0].src[0]
    assert add.src[0] is add.src[1] or add.src[0] == add.src[1]
