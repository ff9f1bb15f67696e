"""DistributedDataParallel with NCCL on 2 GPUs (one process each, fp16): the evt backend's GPU
kernels give eager's gradients, and DDP leaves both ranks with the same ones. Skipped with
fewer than 2 GPUs; the CPU twin (gloo) is tests/torch_backend/test_ddp.py."""
import numpy as np
import pytest

from tests.torch_backend.ddp_ranks import run_ranks

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


def test_ddp_nccl_gradients_match_eager(tmp_path):
    if not torch.cuda.is_available() or torch.cuda.device_count() < 2:
        pytest.skip("needs 2 CUDA GPUs")
    if not torch.distributed.is_nccl_available():
        pytest.skip("this torch build has no NCCL")
    results = run_ranks(tmp_path, world=2, pg="nccl", timeout=300)
    for r in results:
        assert r["fused"] > 0, "no GEMM group ran as an evt kernel"
        # fp16 model, fp32 loss: evt rounds once per fused epilogue, eager once per op
        np.testing.assert_allclose(r["evt"]["losses"], r["eager"]["losses"], rtol=2e-3, atol=2e-3)
        for a, b in zip(r["evt"]["grads"], r["eager"]["grads"]):
            a, b = np.asarray(a), np.asarray(b)
            scale = max(1e-3, float(np.abs(b).max()))
            np.testing.assert_allclose(a, b, rtol=0, atol=2e-2 * scale)
    # the gradients were all-reduced: both ranks hold bit-identical ones
    for a, b in zip(results[0]["evt"]["grads"], results[1]["evt"]["grads"]):
        np.testing.assert_array_equal(a, b)
