import numpy as np

import evt_core
from evt_core.tree.ops import Op
from evt_core.tree.passes.shape_propagation import propagate_shapes
from evt_core.tree.outputs import make_tree


def roles(fn, **examples):
    t = propagate_shapes(make_tree(fn, examples))
    return {n.arg.name: n.arg.dims for n in t.nodes() if n.op in (Op.LOAD, Op.STORE)}


def test_broadcast_roles_are_classified_from_example_shapes():
    L, M, N = 2, 3, 5

    def fn(accum, full, shared, row, col, brow, s):
        return {"D": accum + full + shared + row + col + brow + s}
    r = roles(fn, accum=np.empty((L, M, N), np.float32), full=np.empty((L, M, N), np.float32),
              shared=np.empty((M, N), np.float32), row=np.empty((N,), np.float32),
              col=np.empty((M, 1), np.float32), brow=np.empty((L, 1, N), np.float32), s=0.5,
              D=np.empty((L, M, N), np.float16))
    assert r == {"full": ("L", "M", "N"), "shared": ("M", "N"), "row": ("N",), "col": ("M", 1),
                 "brow": ("L", 1, "N"), "D": ("L", "M", "N")}


def test_shapes_are_inferred_for_every_node():
    def fn(accum, b):
        return {"D": evt_core.ops.relu(accum + b)}
    t = propagate_shapes(make_tree(fn, {"accum": np.empty((3, 5), np.float32), "b": np.empty((5,), np.float32),
                                        "D": np.empty((3, 5), np.float32)}))
    assert all(n.shape == (3, 5) for n in t.nodes() if n.op in (Op.ADD, Op.RELU))
