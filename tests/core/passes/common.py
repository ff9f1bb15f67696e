"""Before/Expected helpers: trace a function into a raw (pre-pipeline) tree."""
import numpy as np

from evt_core.tree.outputs import make_tree

M, N = 4, 6


def raw(fn, **examples):
    ex = {"accum": np.empty((M, N), np.float32)}
    ex.update(examples)
    return make_tree(fn, ex)


def f32(shape):
    return np.zeros(shape, np.float32)
