"""The overlapped cooperative sm_90a schedule's arithmetic, for every backend that generates it
(numba_cuda: codegen/consumer_overlap.py; cupy: codegen/sm90_overlap.py).

Both consumer warpgroups share every 128 x 128 tile, 64 rows each, as in the cooperative
schedule, but hold two accumulator sets: tile t's fused epilogue is cut into pieces at
8-column-group boundaries, and piece c runs right after k-block c of the CTA's next tile was
issued as an asynchronous wgmma group and before that group's wait, so the epilogue's
arithmetic runs under the tensor cores.

Ring invariant (no deadlock with (M, N) inputs streamed through the mainloop's mbarrier ring
as the `aux_stages` positions after each tile's k-blocks): until tile t's aux stages are
released, the producer can fill only the first `stages - aux_stages` k-blocks of the next tile,
and piece c waits on k-block c. So either the first piece reads every ring word the thread
needs into registers and releases the aux stages before its first column group (`preloaded`:
up to two 16-bit inputs, 32 registers a thread each), or they are released after the last
piece and the pieces are at most `stages - aux_stages` (`pieces`).
"""
from .reductions import ROW, reduction_kind
from .sm90 import BM

PIECES = 8          # epilogue pieces a tile (2 of its 16 column groups each) where the ring allows
PRELOAD_WORDS = 64  # ring input words a thread may hold from its epilogue's start (two inputs, no spill)
TILE_N = 128        # the one tile width: two sets of 64 accumulators a thread beside the epilogue


def width_refusal(bn):
    """None where a tile of width bn can hold two accumulator sets, else why not (a 128 x 256
    tile's two sets of 128 accumulators a thread do not fit the consumers' 232 registers)."""
    if bn != TILE_N:
        return f"a {BM} x {bn} tile (two sets of {bn // 2} accumulators a thread)"
    return None


def preload_words(ring_inputs, bn):
    """Registers a consumer thread holds from its epilogue's start when the ring inputs are read
    up front: one packed pair (a 32-bit word) per input, 8-column group and fragment row (2)."""
    return ring_inputs * (bn // 8) * 2


def preloaded(ring_inputs, bn):
    """Whether a tile's ring inputs are read whole by the first piece (and their slots released
    before its first column group)."""
    return ring_inputs > 0 and preload_words(ring_inputs, bn) <= PRELOAD_WORDS


def pieces(ring_inputs, bn, stages, aux_stages):
    """How many k-blocks of the next tile a tile's epilogue is spread over: PIECES, or, where the
    aux stages stay held through the epilogue, no more than the ring can fill beside them."""
    if ring_inputs and not preloaded(ring_inputs, bn):
        return max(1, min(PIECES, stages - aux_stages))
    return PIECES


def piece_of_group(j, groups, n):
    """The piece (of n) that column group j (of `groups`) belongs to: groups spread evenly, in
    order, every piece non-empty while n <= groups."""
    return j * n // groups


def ring_admits(n, stages, aux_stages, released_first):
    """The invariant above for n pieces: a piece waits on one next-tile k-block each, and while a
    tile's aux stages are held the producer fills only stages - aux_stages of them.
    released_first: the aux stages go back in the first piece, after its k-block's wait."""
    held_waits = 1 if released_first else n
    return aux_stages == 0 or held_waits <= stages - aux_stages


MAX_K_PAYS = 512    # the longest K at which the schedule was measured to pay


def pays(program, K, ring_inputs):
    """Whether the overlapped schedule is worth taking without being asked: short K (a tile's
    mainloop a few k-blocks long), an (M, N) input through the ring (`ring_inputs`), and no row
    reduction (whose cross-lane combines every piece repeats). Measured on numba_cuda's kernel
    (H100, bench/RESULTS.md 2026-12-07 runs 109-110): W2 at K = 256 and 512 8-10 % faster than
    cooperative, R5 at K = 512 6 %; W2 at K = 768 3 % slower; W4 (row sums) and W1 (no input)
    slower at every K."""
    return K <= MAX_K_PAYS and ring_inputs and not any(reduction_kind(r) == ROW for r in program.reductions)
