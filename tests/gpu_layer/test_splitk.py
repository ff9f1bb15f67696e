"""The shared split-K rule (backends/gpu/splitk.py); cupy's split_k="auto" is tested in tests/cupy."""
import pytest

from evt_backends.gpu.splitk import MAX_SPLITS, MIN_SPLIT_KBLOCKS, split_count


@pytest.mark.parametrize("tiles,kb,sms,want", [
    (32, 256, 132, 4),      # the MLP's weight gradients: 256 x 2048 over K = 16384
    (64, 256, 132, 2),      # 1024 x 1024 over K = 16384
    (6, 1024, 132, 22),     # 256 x 352 over K = 65536
    (66, 256, 132, 1),      # half a wave of tiles: no split
    (200, 256, 132, 1),
    (1, 10_000, 132, MAX_SPLITS),
    (4, 8, 132, 1),         # K under 4096: not split
    (4, 63, 132, 1),
    (40, 64, 132, 3),
    (4, 100, 132, 25),      # each split at least MIN_SPLIT_KBLOCKS k-blocks
])
def test_split_count(tiles, kb, sms, want):
    got = split_count(tiles, kb, sms)
    assert got == want
    assert 1 <= got <= MAX_SPLITS and (got == 1 or tiles * got <= sms and kb // got >= MIN_SPLIT_KBLOCKS)

