"""Split-K for few-tile, long-K GEMMs (a weight gradient over many rows: a handful of output
tiles, K in the tens of thousands), the part every backend's sm90 kernel shares.

A kernel that gives each output tile to one CTA keeps `tiles` SMs busy, so such a GEMM runs
at tiles / SMs of the machine's rate. With S splits the work units are (tile, split) pairs:
split sp of a tile runs k-blocks [sp·KB/ns, (sp+1)·KB/ns), ns = min(S, KB), so no split is
empty. Units are numbered split-major (u = sp·tiles + t): the CTAs that run at the same time
hold every tile of one K range, so each k-block of A and B comes from DRAM once and the tiles
that read it share it through L2. Each split stores its fp32 partials; the last split to finish
a tile sums them in split order (so runs are bit-identical) and runs the epilogue.
"""
from .sm90 import BM

MAX_SPLITS = 64             # the option's range (1..64)
MIN_SPLIT_KBLOCKS = 4       # a split shorter than this spends more on its fix-up than it saves
MIN_KBLOCKS = 64            # K >= 4096: shorter GEMMs are not split (none was measured to pay)


def valid_option(value) -> bool:
    """The option split_k's values: "auto" or an int from 1 to MAX_SPLITS (1: off)."""
    return value == "auto" or (type(value) is int and 1 <= value <= MAX_SPLITS)


def split_count(tiles: int, k_blocks: int, sms: int) -> int:
    """The split count option split_k="auto" takes: 1 where the tiles alone fill half of the
    SMs or more (splitting would add a wave of partial traffic for little) or K is under
    MIN_KBLOCKS k-blocks, else enough splits that the (tile, split) units about fill one wave,
    each split at least MIN_SPLIT_KBLOCKS k-blocks long. Measured (H100, 2026-12-07, cupy):
    256×2048×16384 45.2 µs (cuBLAS 48.2), 1024×1024×16384 59.2 (58.1), 256×352×65536 57.3
    (49.4); unsplit 91-329. Invariant: 1 <= result <= MAX_SPLITS and tiles * result <=
    max(sms, tiles)."""
    if tiles <= 0 or 2 * tiles >= sms or k_blocks < MIN_KBLOCKS:
        return 1
    return max(1, min(sms // tiles, k_blocks // MIN_SPLIT_KBLOCKS, MAX_SPLITS))


def workspace_floats(tiles: int, splits: int, bn: int) -> int:
    """fp32 partials: one 128 x bn tile's accumulators per (tile, split) (two consumer
    warpgroups of 128 threads, bn / 2 accumulators each)."""
    return tiles * splits * BM * bn


def requested(option, L: int, M: int, N: int, K: int, sms, bk: int = 64) -> int:
    """The split count a call asks for: the option's int, or for "auto" split_count on the
    call's 128 x 128 tiles (the smallest tile both backends' kernels take) and k-blocks of bk;
    1 where the SM count is not known (source tools on a machine without a GPU)."""
    if option != "auto":
        return int(option)
    if not sms:
        return 1
    return split_count(L * -(-M // 128) * -(-N // 128), -(-K // bk), sms)


def splits_run(requested_splits: int, K: int, bk: int = 64) -> int:
    """ns, the splits a launch runs: min(S, k-blocks), so no split is empty (the kernels'
    k-block ranges [sp·KB/ns, (sp+1)·KB/ns) are then at least one k-block long)."""
    return min(requested_splits, max(1, -(-K // bk)))
