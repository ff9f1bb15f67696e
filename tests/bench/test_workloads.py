"""The benchmark's evt epilogues mean the same math as their NumPy spelling, through the public
API and the numpy backend (the GPU run then checks the fused kernels against the torch one)."""
import numpy as np
import pytest

import evt_core
from bench.workloads import SHAPES, WORKLOADS, parse_shape

# Small, non-square and not tile multiples, so an axis mix-up shows.
M, N, K = 24, 40, 17


def _numpy_reference(workload, A, B, aux):
    acc = A.astype(np.float32) @ B.astype(np.float32)
    return workload.numpy_epilogue(acc, **{k: v.astype(np.float32) for k, v in aux.items()})


@pytest.mark.parametrize("key", sorted(WORKLOADS))
def test_evt_epilogue_matches_numpy_math(key):
    wl = WORKLOADS[key]
    tree = evt_core.trace(wl.epilogue, wl.example(M, N))
    A, B, aux = wl.numpy_inputs(M, N, K, seed=1)
    got = evt_core.compile(tree, backend="numpy")(A, B, **aux)
    want = _numpy_reference(wl, A, B, aux)
    assert set(got) == set(wl.outputs) == set(want)
    for name, (axes, dtype) in wl.outputs.items():
        assert got[name].dtype == np.dtype(dtype), name
        assert got[name].shape == wl.extents(axes, M, N), name
        # stores round once to fp16 (rel 2^-11); reductions stay fp32
        rtol = 1e-3 if dtype == "float16" else 1e-5
        np.testing.assert_allclose(got[name].astype(np.float32), want[name], rtol=rtol,
                                   atol=rtol * np.abs(want[name]).max(), err_msg=f"{key} {name}")


@pytest.mark.parametrize("key", sorted(WORKLOADS))
def test_examples_and_inputs_have_the_declared_roles(key):
    wl = WORKLOADS[key]
    ex = wl.example(M, N)
    assert ex["accum"].shape == (M, N) and ex["accum"].dtype == np.float32
    A, B, aux = wl.numpy_inputs(M, N, K)
    assert A.shape == (M, K) and B.shape == (K, N) and A.dtype == B.dtype == np.float16
    for name, (axes, dtype) in wl.aux.items():
        assert aux[name].shape == ex[name].shape == wl.extents(axes, M, N)
        assert aux[name].dtype == np.dtype(dtype)
        assert 0.1 < float(np.abs(aux[name].astype(np.float32)).mean()) < 10    # order one, not zeros


def test_accumulator_is_of_order_one():
    A, B, _ = WORKLOADS["W1"].numpy_inputs(256, 256, 768)
    acc = A.astype(np.float32) @ B.astype(np.float32)
    assert 0.5 < float(acc.std()) < 2.0


def test_standard_shapes_and_flops():
    assert (8192, 3072, 768) in SHAPES and (4096, 4096, 4096) in SHAPES
    assert WORKLOADS["W1"].flops(2, 3, 4) == 48.0


def test_parse_shape():
    assert parse_shape("8192x3072x768") == (8192, 3072, 768)
    for bad in ("8192x3072", "0x1x1", "axbxc"):
        with pytest.raises(ValueError, match="MxNxK"):
            parse_shape(bad)
