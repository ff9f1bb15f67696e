"""numba_cuda's serial split-K (option split_k, codegen/splitk.py) on an H100/H200: few-tile,
long-K GEMMs split over (tile, split) units with the last split's fix-up, against the reference
interpreter with poisoned outputs. Shares the sm_90a GPU tests' guard and cases."""
import os
import sys

import numpy as np
import pytest

import evt_core

from tests.gpu.test_numba_sm90 import _wide_more, sm90_gpu  # noqa: F401  (sm90_gpu: the autouse guard)

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "numba_cuda"))
from sm90_kernels import _bare, _row_col_stats  # noqa: E402
from trees import case, compare  # noqa: E402

pytestmark = pytest.mark.gpu


def _split_case(name, L, M, N, K):
    """(tree, A, B, inputs) of the kinds split-K takes (no (M, N) input), fp16: a bare store,
    W2's kind (a column vector and a column sum) and row, column and whole-tile reductions."""
    if name == "col_sums":
        return _wide_more("col_sums", L, M, N, K, "float16")
    _, A, B, _ = case("activations", L, M, N, K)
    lead = (L,) if L else ()
    ex = {"accum": np.empty(lead + (M, N), np.float32)}
    if name == "bare":
        return evt_core.trace(_bare, {**ex, "D": np.empty(lead + (M, N), np.float16)}), A, B, {}
    inputs = {"bias": (np.random.default_rng(5).integers(-8, 8, N) / 4).astype(np.float32)}
    tree = evt_core.trace(_row_col_stats, {**ex, **inputs, "y": np.empty(lead + (M, N), np.float16),
                                           "y_rowsum": np.empty(lead + (M,), np.float32),
                                           "y_colmax": np.empty(lead + (N,), np.float32),
                                           "y_min": np.empty(lead, np.float32)})
    return tree, A, B, inputs


@pytest.mark.parametrize("name,shape,splits,opts", [
    ("stats", (0, 256, 352, 8192), 8, {}),
    ("col_sums", (0, 200, 328, 4096), 5, {"deterministic": True}),
    ("stats", (2, 136, 264, 1000), 3, {}),                   # batched, K not a multiple of 64
    ("bare", (0, 130, 136, 72), 4, {}),                      # 2 k-blocks for 4 splits: 2 run
    ("col_sums", (0, 4096, 1024, 256), 2, {}),               # 512 units: many per CTA
    ("bare", (0, 256, 2048, 16384), "auto", {"sm90_tile_n": 256}),   # 128 x 256 tiles, the shared rule
    ("stats", (0, 384, 256, 4100), 6, {"deterministic": True}),
])
def test_split_k(name, shape, splits, opts):
    """split_k (codegen/splitk.py): (tile, split) units, per-warpgroup partials and the last
    split's fix-up, with column, row and tile reductions in the epilogue, batches, K tails, more
    splits than k-blocks and many units per CTA; poisoned outputs; called twice, since the
    counters must be back at zero, and bit-identical, since the partials are summed in split
    order (the integer-valued operands make the atomic reductions' sums exact too)."""
    tree, A, B, inputs = _split_case(name, *shape)
    k = evt_core.compile(tree, backend="numba_cuda", sm90=True, split_k=splits, **opts)
    ref = evt_core.interpret(tree, A, B, **inputs)
    got = k(A, B, **inputs)
    compare(got, ref, f"split_k={splits} {name} {shape}")
    again = k(A, B, **inputs)
    for out in got:
        assert np.array_equal(np.asarray(got[out]).reshape(-1).view(np.uint8),
                              np.asarray(again[out]).reshape(-1).view(np.uint8)), out
    stage = k.stages["sm90"]
    assert "cooperative schedule" in stage and "serial split-K" in stage, stage
    if splits == "auto":
        assert "tile 128x256x64" in stage, stage


def test_split_k_repeated_calls_replay_the_buffers():
    """torch arrays: calls after the first replay the recorded parameters (runtime/fastcall.py),
    split-K's partials and counters among them; a larger call grows the buffers, and the first
    signature's replays keep the old ones."""
    torch = pytest.importorskip("torch")
    k = evt_core.compile(_split_case("col_sums", 0, 200, 328, 4096)[0], backend="numba_cuda", sm90=True, split_k=4)
    for shape in [(0, 200, 328, 4096), (0, 1000, 1000, 4096), (0, 200, 328, 4096)]:
        tree, A, B, inputs = _split_case("col_sums", *shape)
        dev = {n: torch.from_numpy(v).cuda() for n, v in inputs.items()}
        ref = evt_core.interpret(tree, A, B, **inputs)
        for i in range(3):
            out = k(torch.from_numpy(A).cuda(), torch.from_numpy(B).cuda(), **dev)
            compare({n: v.cpu().numpy() for n, v in out.items()}, ref, f"{shape} call {i}")
    assert "serial split-K, 4 splits of K" in k.stages["sm90"], k.stages["sm90"]

