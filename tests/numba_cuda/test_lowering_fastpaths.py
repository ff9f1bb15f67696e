"""runtime/lowering_fastpaths: the linear `_find_singly_assigned_variable` picks the same
variables, in the same order, as numba-cuda's own, and is in force only inside linear()."""
import pytest

from .test_typing_memo import _kernel


def test_same_variables_as_numba():
    pytest.importorskip("numba.cuda")
    from numba import cuda
    from numba.cuda.lowering import Lower
    from evt_backends.numba_cuda.runtime import lowering_fastpaths
    from evt_backends.numba_cuda.runtime.build_sm90 import _device_functions_for
    original = Lower.__dict__["_find_singly_assigned_variable"]
    linear = lowering_fastpaths._singly_assigned(original)
    compared = []

    def both(self):
        linear(self)
        fast = list(self._singly_assigned_vars)
        original(self)
        assert fast == list(self._singly_assigned_vars)
        compared.append(len(fast))
    Lower._find_singly_assigned_variable = both
    try:
        with _device_functions_for((9, 0)):
            cuda.compile_ptx(*_kernel(), cc=(9, 0))
    finally:
        Lower._find_singly_assigned_variable = original
    assert compared and sum(compared) > 0


def test_scoped_and_reentrant():
    pytest.importorskip("numba.cuda")
    from numba.cuda.lowering import Lower
    from evt_backends.numba_cuda.runtime import lowering_fastpaths
    before = Lower._find_singly_assigned_variable
    with lowering_fastpaths.linear():
        inside = Lower._find_singly_assigned_variable
        with lowering_fastpaths.linear():
            assert Lower._find_singly_assigned_variable is inside
        assert Lower._find_singly_assigned_variable is inside
    assert inside is not before and Lower._find_singly_assigned_variable is before
