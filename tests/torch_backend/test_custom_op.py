"""torch.ops.evt.run: eager, under torch.compile, opcheck, errors."""
import numpy as np
import pytest
import torch

import evt_core
import evt_core.torch as et
from evt_core import ops
from evt_core.errors import ShapeError, TraceError


def _epi(accum, C, alpha):
    F = alpha * accum + C
    D = ops.relu(F)
    F_colsum = ops.sum(F, over="M")
    return D, F_colsum


def _tree(M=16, N=8, dtype=np.float32):
    return evt_core.trace(_epi, {"accum": np.empty((M, N), np.float32), "C": np.empty((M, N), dtype),
                                 "alpha": 0.5, "D": np.empty((M, N), dtype),
                                 "F_colsum": np.empty((N,), np.float32)})


def _inputs(dtype=torch.float32, M=16, N=8, K=4):
    g = torch.Generator().manual_seed(0)
    return (torch.randn(M, K, generator=g).to(dtype), torch.randn(K, N, generator=g).to(dtype),
            torch.randn(M, N, generator=g).to(dtype))


def test_eager_cpu_matches_torch():
    f = et.kernel_op(_tree())
    A, B, C = _inputs()
    out = f(A, B, C=C, alpha=0.5)
    F = 0.5 * (A @ B) + C
    assert out["D"].dtype == torch.float32 and out["D"].shape == (16, 8)
    torch.testing.assert_close(out["D"], F.relu(), rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(out["F_colsum"], F.sum(0), rtol=1e-5, atol=1e-5)


def test_bfloat16_round_trip():
    f = et.kernel_op(_tree(dtype=evt_core.dtypes.bfloat16))
    A, B, C = _inputs(torch.bfloat16)
    out = f(A, B, C=C, alpha=0.5)
    ref = (0.5 * (A.float() @ B.float()) + C.float()).relu()
    assert out["D"].dtype == torch.bfloat16
    torch.testing.assert_close(out["D"].float(), ref, rtol=1e-2, atol=1e-2)


def test_inside_torch_compile_fullgraph():
    f = et.kernel_op(_tree())
    A, B, C = _inputs()

    @torch.compile(fullgraph=True, backend="eager")
    def g(A, B, C):
        return f(A, B, C=C, alpha=0.5)["D"] * 2

    torch.testing.assert_close(g(A, B, C), 2 * (0.5 * (A @ B) + C).relu())


def test_opcheck():
    f = et.kernel_op(_tree())
    A, B, C = _inputs()
    torch.library.opcheck(torch.ops.evt.run.default, (f.key, A, B, [C], [0.5]))


def test_same_tree_same_key():
    assert et.kernel_op(_tree()).key == et.kernel_op(_tree()).key


def test_errors_name_the_culprit():
    f = et.kernel_op(_tree())
    A, B, C = _inputs()
    with pytest.raises(ShapeError, match="missing input 'C'"):
        f(A, B, alpha=0.5)
    with pytest.raises(ShapeError, match="unexpected input 'bias'"):
        f(A, B, C=C, alpha=0.5, bias=C)
    with pytest.raises(TraceError, match="no evt kernel is registered"):
        torch.ops.evt.run.default("nope", A, B, [C], [0.5])
    with pytest.raises(TraceError, match="expected a tree"):
        et.kernel_op(lambda accum: accum)
