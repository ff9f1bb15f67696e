"""runtime/typing_memo: the build-scoped memo of numba's call and global typing changes what a
build costs, never what it produces, and is in force only inside memoized()."""
import re

import pytest


def _kernel():
    from numba import cuda, int64
    from evt_backends.numba_cuda.codegen.ptx_sm90 import udiv32

    @cuda.jit(device=True, forceinline=True)
    def twice(v):
        return v + v

    def kern(out, n, k):
        s = 0
        acc = 0
        for i in range(n):          # loop-carried values: several propagation rounds
            acc = acc + twice(udiv32(i + k, 3)) * 2 + min(s, 7)
            s = s + 1
            if s == 4:
                s = 0
        out[0] = acc
    return kern, (int64[:], int64, int64)


def test_same_ptx_with_and_without_memo():
    pytest.importorskip("numba.cuda")
    from numba import cuda
    from evt_backends.numba_cuda.runtime import typing_memo
    from evt_backends.numba_cuda.runtime.build_sm90 import _device_functions_for
    with _device_functions_for((9, 0)):     # the device function's target without a GPU
        plain = cuda.compile_ptx(*_kernel(), cc=(9, 0))[0]
        with typing_memo.memoized():
            memo = cuda.compile_ptx(*_kernel(), cc=(9, 0))[0]
    assert _unnamed(memo) == _unnamed(plain)


def _unnamed(ptx):
    """PTX with the mangled names (they carry a per-compile serial number) left out."""
    return re.sub(r"_ZN\w+", "NAME", ptx)


def test_scoped_and_reentrant():
    pytest.importorskip("numba.cuda")
    from numba.core.types.functions import BaseFunction
    from numba.cuda.target import CUDATypingContext
    from evt_backends.numba_cuda.runtime import typing_memo
    before = BaseFunction.get_call_type, CUDATypingContext.resolve_value_type
    with typing_memo.memoized():
        inside = BaseFunction.get_call_type, CUDATypingContext.resolve_value_type
        with typing_memo.memoized():
            assert (BaseFunction.get_call_type, CUDATypingContext.resolve_value_type) == inside
        assert (BaseFunction.get_call_type, CUDATypingContext.resolve_value_type) == inside
    assert inside[0] is not before[0] and inside[1] is not before[1]
    assert (BaseFunction.get_call_type, CUDATypingContext.resolve_value_type) == before
