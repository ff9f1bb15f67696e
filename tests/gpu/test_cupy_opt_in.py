"""GPU tests of the cupy backend's opt-in paths, against the reference interpreter with
poisoned outputs (EVT_POISON=1 in the GPU suite): the M-major A path (a_mn_major_tma: TMA
panels and a transposed-A wgmma) and serial split-K (split_k). Shares the operand and
epilogue builders of test_cupy.py."""
import numpy as np
import pytest

import evt_core

from tests.gpu import cupy_gpu

pytestmark = pytest.mark.gpu
# test_cupy skips itself at import without cupy or a GPU: import it only past the same guard
cp = cupy_gpu.require()

from tests.gpu.test_cupy import _SM90_TILES, check, make  # noqa: E402


@pytest.mark.parametrize("tile", sorted(_SM90_TILES))
@pytest.mark.parametrize("name,shape", [("paper", (1, 200, 328, 72)), ("reduce", (1, 1032, 520, 200)),
                                        ("bias_gelu", (3, 136, 264, 64)), ("paper", (1, 4096, 1024, 256))])
def test_m_major_a_by_tma(tile, name, shape):
    """a_mn_major_tma=True: an M-major A (what a weight gradient reads: the transposed
    activations) goes through TMA panels and a transposed wgmma, on every sm90 schedule, with
    edge tiles in M and N, K tails and batches, against the reference. M % 8 == 0: TMA needs
    16-byte rows, here along K."""
    from evt_backends.cupy.codegen.plan import TileConfig
    L, M, N, K = shape
    tree, A, B, inputs = make(name, L, M, N, K, "float16", batched=L > 1)
    # the same values, unit stride along M, built on the device: cp.asarray of a strided host
    # array that is neither C- nor F-ordered (the batched case) would hand over a C-ordered copy
    Am = cp.swapaxes(cp.ascontiguousarray(cp.asarray(np.swapaxes(A, -1, -2))), -1, -2)
    assert Am.strides[-2] == A.itemsize
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False, a_mn_major_tma=True,
                            tile=TileConfig(**_SM90_TILES[tile]))
    got = kern(Am, cp.asarray(B), **{k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()})
    check(got, evt_core.interpret(tree, A, B, **inputs), K)
    assert not kern.run.last.spec.a_kmajor and not kern.run.watchdog_fired()


def test_m_major_a_without_the_option_takes_the_sm80_path():
    tree, A, B, inputs = make("paper", 1, 200, 328, 72, "float16", batched=False)
    Am = np.swapaxes(np.ascontiguousarray(A.T), 0, 1)
    kern = evt_core.compile(tree, backend="cupy", autotune=False, a_mn_major_tma=False)
    check(kern(cp.asarray(Am), cp.asarray(B), **{k: cp.asarray(v) if isinstance(v, np.ndarray) else v
                                                  for k, v in inputs.items()}),
          evt_core.interpret(tree, A, B, **inputs), 72)
    assert kern.run.last.spec.mainloop == "sm80"


# sums and means over several CTAs combine by float atomics when deterministic=False (the
# default): their last bits depend on arrival order, so only the other outputs are bit-compared
_ATOMIC_SUMS = {"row_sum", "col_mean"}


@pytest.mark.parametrize("name,shape,splits", [("paper", (1, 256, 352, 8192), 8), ("reduce", (1, 200, 328, 4096), 5),
                                               ("bias_gelu", (2, 136, 264, 1000), 3), ("paper", (1, 130, 136, 72), 4),
                                               ("reduce", (1, 4096, 1024, 256), 2)])
def test_split_k(name, shape, splits):
    """split_k: (tile, split) work units, per-warpgroup partials and a last-arriver fix-up,
    with column/row reductions in the epilogue, batches, K not a multiple of 64, more splits
    than k-blocks (K = 72: 2 k-blocks for 4 splits) and many tiles per CTA; run twice, since
    the counters must be back at zero, and bit-identical, since the split-K sum is in split order
    (reductions across CTAs excepted: they combine by atomics)."""
    L, M, N, K = shape
    tree, A, B, inputs = make(name, L, M, N, K, "float16", batched=L > 1)
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False, split_k=splits)
    got = kern(A, B, **inputs)
    check(got, evt_core.interpret(tree, A, B, **inputs), K)
    again = kern(A, B, **inputs)
    for k in got:
        if k in _ATOMIC_SUMS:
            continue
        # reshape(-1): a scalar reduction's 0-d result has no byte view
        assert np.array_equal(np.asarray(got[k]).reshape(-1).view(np.uint8),
                              np.asarray(again[k]).reshape(-1).view(np.uint8)), k
    assert kern.run.last.spec.split_k == splits and not kern.run.watchdog_fired()
