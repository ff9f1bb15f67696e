"""Serial split-K for the cooperative sm_90a kernel (option split_k): the work units, split-major
order and last-arriver fix-up of backends/gpu/splitk.py, as lines of the generated numba source
(the cupy backend's codegen/sm90_splitk.py is the same design in CUDA C++).

A split variant takes three more parameters: `splits` (ns = splitk.splits_run: at most the
k-blocks, so no split is empty), `skw` (the fp32 partials) and `skc` (one u32 counter per tile
and consumer warpgroup, zero between launches). The producer and both consumers loop over the
units u = sp * tiles + tile of their CTA; split sp runs k-blocks [sp KB / ns, (sp + 1) KB / ns).

Each consumer warpgroup owns 64 rows of its tile, so the fix-up is per (tile, warpgroup): the
warpgroup stores its accumulators into its slot, fences, and bumps its counter; the warpgroup
that arrives last sums every split's slot in split order from 0.0 (so runs are bit-identical,
whichever split arrives last) and runs the epilogue on the sums, which therefore runs once per
tile half; the others go on to their next unit. The cooperative epilogue synchronises each
warpgroup on its own named barrier (1 + wg, 128 threads) only, so a warpgroup that skips it
never leaves the other waiting, and no warpgroup waits for another CTA: no launch order can
deadlock. A thread's registers hold the same fragment positions in every split, so the partials
need no layout knowledge, and deterministic reductions keep their per-tile partial slots (the
epilogue writes each once).

Invariant: a variant without split gets none of these lines or parameters, so its source is
byte-identical to the kernel without split-K (tests/numba_cuda/dump_sources.py)."""
from .abi import Param

PARAMS = [Param("splits", "int"), Param("skw", "ptr"), Param("skc", "ptr")]


def params(split):
    return list(PARAMS) if split else []


def slot_floats(n_acc):
    """fp32 partials of one (tile, warpgroup, split) slot: n_acc per thread of 128."""
    return n_acc * 128


def unit_loop(ind):
    """Opens a loop over the CTA's work units (producer and consumers alike): sets sp, tile and
    the k-block range [kb0, kb1) of unit u (u32 math: tiles * splits < 2^31, select checks)."""
    return [f"{ind}u = cuda.blockIdx.x",
            f"{ind}while u < units:    # (tile, split) units, split-major (codegen/splitk.py)",
            f"{ind}    sp = udiv32(u, tiles)",
            f"{ind}    tile = u - sp * tiles",
            f"{ind}    kb0 = udiv32(sp * ktiles, splits)",
            f"{ind}    kb1 = udiv32((sp + 1) * ktiles, splits)"]


def fixup(n_acc):
    """After a unit's k-loop (acc drained): the lines that leave `last` true where this
    warpgroup runs the epilogue, with acc holding the sum of every split's partials."""
    slot = slot_floats(n_acc)
    return ["last = True",
            "if splits > 1:    # split-K fix-up: partials out; the last split of the tile half sums them",
            f"    skp = skw + (((tile * 2 + wg) * splits + sp) * {slot} + tid) * 4",
            "    sk_store(acc, skp)",
            "    cuda.threadfence()",
            "    named_bar_sync(1 + wg, 128)   # every thread's partials are stored and fenced",
            "    last = sk_arrive(skc + (tile * 2 + wg) * 4, tid, splits - 1, 1 + wg) != 0",
            "    if last:",
            "        cuda.threadfence()",
            "        acc = sk_zero(acc)",
            f"        skr = skw + ((tile * 2 + wg) * splits * {slot} + tid) * 4",
            "        for o in range(splits):    # in split order, whichever split arrived last",
            f"            acc = sk_add(acc, skr + o * {4 * slot})"]


def epilogue(lines):
    """The epilogue lines, run by the last split only."""
    return ["if last:"] + ["    " + x for x in lines]
