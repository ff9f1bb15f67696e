"""Correctness gate for the benchmark: a candidate whose outputs disagree with the fp32 reference
gets no time in the table.

Works on NumPy arrays and on torch tensors alike (only `abs`, `.sum()`, `.max()`, `isfinite`
and float arithmetic are used), so the GPU run compares on the device and the CPU tests exercise
the same code on NumPy.
"""
import math

import numpy as np

# ||out - ref|| / ||ref|| below this, for every output. fp16 rounding alone gives ~3e-4 and an
# eager fp16 epilogue (which rounds the accumulator first) ~1e-3; a wrong index, a missed tile
# or an unwritten element (NaN under EVT_POISON) lands orders of magnitude above.
REL_L2_TOL = 5e-3
# max |out - ref| below this fraction of max |ref|: catches a few bad elements that the
# norm above would average away.
MAX_ABS_TOL = 2e-2


def _namespace(x):
    if isinstance(x, np.ndarray):
        return np
    import torch
    return torch


def error_stats(out, ref):
    """Error of `out` against `ref` (same shape, both float64 or float32, same namespace)."""
    if tuple(out.shape) != tuple(ref.shape):
        return {"shape": [list(out.shape), list(ref.shape)]}
    xp = _namespace(ref)
    finite = xp.isfinite(ref)
    bad = int((~xp.isfinite(out) & finite).sum())          # NaN/Inf where the reference is finite
    diff = abs(xp.where(finite, out, 0) - xp.where(finite, ref, 0))
    ref_abs = abs(xp.where(finite, ref, 0))
    ref_norm = math.sqrt(float((ref_abs * ref_abs).sum()))
    diff_norm = math.sqrt(float((diff * diff).sum())) if bad == 0 else math.inf
    size = math.prod(ref.shape)
    return {
        "nonfinite": bad,
        "rel_l2": diff_norm / ref_norm if ref_norm else diff_norm,
        "max_abs": float(diff.max()) if size else 0.0,
        "ref_max_abs": float(ref_abs.max()) if size else 0.0,
    }


def verdict(stats):
    """'' when `stats` (from error_stats) pass, else the reason they fail."""
    if "shape" in stats:
        got, want = stats["shape"]
        return f"shape {tuple(got)} != reference {tuple(want)}"
    if stats["nonfinite"]:
        return f"{stats['nonfinite']} NaN/Inf elements (unwritten or overflowed)"
    if not stats["rel_l2"] <= REL_L2_TOL:
        return f"rel L2 error {stats['rel_l2']:.2e} > {REL_L2_TOL:.0e}"
    if not stats["max_abs"] <= MAX_ABS_TOL * max(stats["ref_max_abs"], 1e-30):
        return f"max abs error {stats['max_abs']:.3g} > {MAX_ABS_TOL:.0e} x max|ref| {stats['ref_max_abs']:.3g}"
    return ""


def check_outputs(outputs, reference, to_float):
    """Compare every reference output. `to_float(x)` converts one output (any array type) to the
    reference's namespace and dtype. Returns (failure reason or '', {name: stats})."""
    per_output, failures = {}, []
    missing = sorted(set(reference) - set(outputs or {}))
    if missing:
        return f"missing outputs {missing}", {}
    for name, ref in reference.items():
        stats = error_stats(to_float(outputs[name]), ref)
        per_output[name] = stats
        why = verdict(stats)
        if why:
            failures.append(f"{name}: {why}")
    return "; ".join(failures), per_output
