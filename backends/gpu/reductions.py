"""How a GPU kernel combines a reduction, from the problem axes it removes: one classification
for both GPU backends (their epilogues are organised by it)."""
import struct

from evt_core.tree.ops import REDUCTIONS

ROW, COL, ALL, ELEM = "row", "col", "all", "elem"


def reduction_kind(red):
    """ROW: over N keeping M (one value per row, combined across a row's lanes); COL: over M
    keeping N (one value per column, combined across rows); ALL: over both (one value per CTA
    combined); ELEM: over neither M nor N (only L, or nothing: every element is its own partial)."""
    m, n = "M" in red.over, "N" in red.over
    return {(False, True): ROW, (True, False): COL, (True, True): ALL, (False, False): ELEM}[(m, n)]


def identity_bits(op, negated=False):
    """The fp32 bit pattern of reduction `op`'s identity, read from the op table (tree/ops.py),
    or of its negation where a kernel carries the reduction negated (numba_cuda keeps AMIN as
    the AMAX of -x, so only two combine operators exist)."""
    value = REDUCTIONS[op].identity
    return struct.unpack("<I", struct.pack("<f", -value if negated else value))[0]


def dense_as_workspace(strides, extents):
    """Whether an output with element strides `strides` on the (L, M, N) frame is laid out as the
    dense atomic workspace (WL, WM, WN) = `extents` (a reduced axis has extent 1) would be:
    strides (WM WN, WN, 1) over every axis of extent > 1. Then a kernel's atomics can combine
    straight into the output, with no workspace and no finishing pass (both backends' direct
    reductions; which ops may is each backend's rule)."""
    wl, wm, wn = extents
    return all(e <= 1 or s == want for e, s, want in zip(extents, strides, (wm * wn, wn, 1)))
