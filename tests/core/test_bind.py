"""Layout views as strides: one definition shared by the interpreter and every backend."""
import numpy as np
import pytest

from evt_core.bind import view_strides
from evt_core.interpreter import apply_view


def strides_of(x):
    return tuple(s // x.itemsize for s in x.strides)


CASES = [
    ((4, 6), [("permute", (1, 0))]),
    ((24,), [("reshape", (4, 6))]),
    ((2, 3, 4), [("reshape", (6, 4))]),
    ((2, 3, 4), [("permute", (2, 0, 1)), ("reshape", (4, 6))]),
    ((6,), [("pad", 1), ("broadcast", (4, 6))]),
    ((4, 6), [("place", (1, 2))]),
    ((6,), [("place", (2,))]),
    ((2, 6), [("place", (0, 2))]),
]


@pytest.mark.parametrize("shape,view", CASES)
def test_view_strides_match_numpy_views(shape, view):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    y = apply_view(x, view)
    got = view_strides(x.shape, strides_of(x), view)
    assert got is not None
    vshape, vstrides = got
    assert vshape == y.shape
    rebuilt = np.lib.stride_tricks.as_strided(x, vshape, tuple(s * 4 for s in vstrides))
    np.testing.assert_array_equal(rebuilt, y)


def test_reshape_that_needs_a_copy_is_reported():
    x = np.arange(24, dtype=np.float32).reshape(4, 6).T       # not contiguous
    assert view_strides(x.shape, strides_of(x), [("reshape", (24,))]) is None
