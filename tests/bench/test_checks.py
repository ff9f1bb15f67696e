"""The benchmark's correctness gate, on NumPy arrays (the GPU run uses the same code on torch)."""
import numpy as np

from bench.checks import MAX_ABS_TOL, REL_L2_TOL, check_outputs, error_stats, verdict


def _ref(shape=(64, 48), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_identical_outputs_pass():
    ref = _ref()
    assert verdict(error_stats(ref.copy(), ref)) == ""


def test_fp16_rounding_passes():
    ref = _ref()
    out = ref.astype(np.float16).astype(np.float32)
    stats = error_stats(out, ref)
    assert stats["rel_l2"] < REL_L2_TOL / 5
    assert verdict(stats) == ""


def test_unwritten_element_fails_as_nan():
    ref = _ref()
    out = ref.copy()
    out[3, 7] = np.nan                       # what EVT_POISON leaves in an element nobody wrote
    assert "1 NaN/Inf" in verdict(error_stats(out, ref))


def test_nan_in_reference_is_not_counted_against_the_output():
    ref = _ref()
    ref[0, 0] = np.nan
    out = ref.copy()
    assert verdict(error_stats(out, ref)) == ""


def test_swapped_rows_fail_on_the_norm():
    ref = _ref()
    out = ref[::-1].copy()
    assert "rel L2" in verdict(error_stats(out, ref))


def test_one_bad_element_fails_on_the_max():
    ref = _ref((256, 256))
    out = ref.copy()
    out[5, 5] += 4 * MAX_ABS_TOL * np.abs(ref).max()
    why = verdict(error_stats(out, ref))
    assert "max abs" in why


def test_shape_mismatch_is_named():
    assert "shape (3, 4) != reference (4, 3)" in verdict(error_stats(np.zeros((3, 4)), np.zeros((4, 3))))


def test_check_outputs_reports_each_output_and_missing_ones():
    ref = {"y": _ref(), "y_sum": _ref((64,))}
    out = {"y": ref["y"].copy(), "y_sum": -ref["y_sum"]}
    why, stats = check_outputs(out, ref, lambda x: x)
    assert why.startswith("y_sum:") and set(stats) == {"y", "y_sum"}
    why, _ = check_outputs({"y": ref["y"]}, ref, lambda x: x)
    assert why == "missing outputs ['y_sum']"
