"""Tolerances both backends' GPU tests share (toolchain-notes §5.1)."""
import numpy as np


def reassociation_atol(r, full):
    """Absolute slack for a reduction output `r` whose terms come from an output of `full`
    elements: a kernel sums its n = full / r.size fp32 terms in another order than the reference
    (tiles, warps, atomics), which moves the result by about u * sum|x|; with sum|x| ~ sqrt(n) *
    max|sum| for mixed-sign terms, 10x that still flags one dropped term (whose size is ~ sum|x|
    / n) while accepting a different summation order. 0 for an elementwise output."""
    n = full // max(r.size, 1)
    if n <= 1 or not r.size:
        return 0.0
    return 10 * 2.0 ** -24 * n ** 0.5 * float(np.nanmax(np.abs(r.astype(np.float32))))
