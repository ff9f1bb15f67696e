"""bench.tile_sweep's CPU-side pieces: option parsing and the agreement check every candidate
passes before it is timed."""
import pytest

from bench.tile_sweep import _agree, _options


def test_option_sets_parse_as_python_literals():
    assert _options('sm90_tile_n=256:fast_math=True:sm90_schedule="pingpong"') == \
        {"sm90_tile_n": 256, "fast_math": True, "sm90_schedule": "pingpong"}
    assert _options("") == {}


def test_agreement_check_flags_nan_and_wrong_values():
    torch = pytest.importorskip("torch")
    ref = {"D": torch.ones(4, 8, dtype=torch.float16), "S": torch.arange(4, dtype=torch.float32) + 1}
    assert _agree({k: v.clone() for k, v in ref.items()}, ref) is None
    poisoned = {"D": ref["D"].clone(), "S": ref["S"].clone()}
    poisoned["D"][1, 2] = float("nan")                        # an element the kernel never wrote
    assert "D: 1 of 32" in _agree(poisoned, ref)
    off = {"D": ref["D"].clone(), "S": ref["S"] * 1.01}       # a reduction 1 % off
    assert _agree(off, ref).startswith("S:")
