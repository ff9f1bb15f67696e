import numpy as np

from evt_core import ops
from evt_core.interpreter import interpret
from evt_core.tree.ops import Op
from evt_core.tree.passes.dag_to_tree import dag_to_tree
from evt_core.tree.verify import verify_tree_shape
from tests.core.passes.common import f32, raw


def test_shared_value_becomes_one_topological_visitor():
    def before(accum, b):
        z = accum + b
        return {"z": z, "y": ops.gelu_tanh(z)}
    after = dag_to_tree(raw(before, b=f32((6,)), z=f32((4, 6)), y=f32((4, 6))))
    verify_tree_shape(after)
    (root,) = after.roots
    assert root.op is Op.TOPO and root.arg.op is Op.SINK


def test_value_used_twice_inside_one_expression():
    def before(accum):
        z = accum * 2.0
        return {"D": z + z}
    after = dag_to_tree(raw(before, D=f32((4, 6))))
    verify_tree_shape(after)


def test_merge_point_is_the_post_dominator_dgelu_case():
    """CUTLASS picks the first node reachable from every use of z, which the 0.5*(1+t) path
    bypasses; the post-dominator is the final add, and the result must not change."""
    def before(accum, z):
        k, a = 0.7978845608, 0.044715
        t = ops.tanh(k * (z + a * z * z * z))
        d = 0.5 * (1 + t) + 0.5 * z * (1 - t * t) * k * (1 + 3 * a * z * z)
        return {"dx": accum * d}
    rng = np.random.default_rng(0)
    zv = rng.standard_normal((4, 6)).astype(np.float32)
    t0 = raw(before, z=zv, dx=f32((4, 6)))
    t1 = dag_to_tree(t0)
    verify_tree_shape(t1)
    A, B = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 6)).astype(np.float32)
    np.testing.assert_array_equal(interpret(t0, A, B, z=zv)["dx"], interpret(t1, A, B, z=zv)["dx"])
