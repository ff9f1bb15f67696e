"""Every load and store role through the interpreter, against NumPy broadcasting."""
import numpy as np
import pytest

import evt_core
from evt_core import ops
from tests.core.helpers import empty, gemm, ints, normal

L, M, N, K = 3, 4, 6, 2


@pytest.mark.parametrize("shape", [(L, M, N), (M, N), (N,), (1, N), (M, 1), (L, 1, N), (L, M, 1), (L, 1, 1), (), (1,)],
                         ids=str)
def test_every_load_role(shape):
    x = normal(shape)
    t = evt_core.trace(lambda accum, x: {"D": accum * x}, {"accum": empty((L, M, N)), "x": x, "D": empty((L, M, N))})
    A, B = ints((L, M, K)), ints((L, K, N))
    np.testing.assert_allclose(evt_core.interpret(t, A, B, x=x)["D"], gemm(A, B) * x, rtol=1e-6)


def test_column_major_aux_and_shared_weights():
    C = np.asfortranarray(normal((M, N)))
    t = evt_core.trace(lambda accum, C: {"D": accum + C}, {"accum": empty((L, M, N)), "C": C, "D": empty((L, M, N))})
    A, B = ints((L, M, K)), ints((K, N))          # B shared by all batches
    np.testing.assert_allclose(evt_core.interpret(t, A, B, C=C)["D"], gemm(A, B) + C, rtol=1e-6)


@pytest.mark.parametrize("shape", [(L, M, N), (M, N), (L, 1, N), (N,)], ids=str)
def test_store_roles_of_broadcast_values(shape):
    b = normal(shape[-1:])
    t = evt_core.trace(lambda accum, b: {"D": b * 2.0, "E": accum + b},
                       {"accum": empty((L, M, N)), "b": b, "D": empty(shape), "E": empty((L, M, N))})
    out = evt_core.interpret(t, ints((L, M, K)), ints((L, K, N)), b=b)
    np.testing.assert_array_equal(out["D"], np.broadcast_to(b * np.float32(2), shape))


def test_constant_output():
    t = evt_core.trace(lambda accum: {"D": 3.0, "E": accum}, {"accum": empty((M, N)), "D": empty((M, N)),
                                                             "E": empty((M, N))})
    assert (evt_core.interpret(t, ints((M, K)), ints((K, N)))["D"] == 3).all()


def test_scalar_parameter_is_passed_at_run_time():
    t = evt_core.trace(lambda accum, s: {"D": accum * s}, {"accum": empty((M, N)), "s": 1.0, "D": empty((M, N))})
    A, B = ints((M, K)), ints((K, N))
    for s in (0.5, -2.0):
        np.testing.assert_array_equal(evt_core.interpret(t, A, B, s=s)["D"], gemm(A, B) * s)


def test_dag_epilogue_value_used_twice():
    t = evt_core.trace(lambda accum: {"D": (lambda z: z + z * z)(ops.tanh(accum))},
                       {"accum": empty((M, N)), "D": empty((M, N))})
    A, B = ints((M, K)), ints((K, N))
    z = np.tanh(gemm(A, B))
    np.testing.assert_allclose(evt_core.interpret(t, A, B)["D"], z + z * z, rtol=1e-6, atol=1e-6)
