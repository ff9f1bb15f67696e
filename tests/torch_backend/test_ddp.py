"""DistributedDataParallel (2 processes, gloo, CPU): the evt backend gives eager's gradients."""
import numpy as np

from tests.torch_backend.ddp_ranks import run_ranks


def test_ddp_gradients_match_eager(tmp_path):
    results = run_ranks(tmp_path, world=2, pg="gloo")
    for r in results:
        assert r["fused"] > 0
        np.testing.assert_allclose(r["evt"]["losses"], r["eager"]["losses"], rtol=1e-5, atol=1e-6)
        for a, b in zip(r["evt"]["grads"], r["eager"]["grads"]):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    # DDP averaged the gradients: both ranks hold the same ones
    for a, b in zip(results[0]["evt"]["grads"], results[1]["evt"]["grads"]):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
