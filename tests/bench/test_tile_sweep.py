"""bench.tile_sweep's and bench.group_kernels' CPU-side pieces: option parsing (one parser,
bench.run.parse_options) and the agreement gate every swept candidate passes before it is
timed (bench.checks, the ladder's gate, against the autotuned cupy kernel's outputs)."""
import pytest

from bench.run import parse_options, split_spec
from bench.tile_sweep import _options


def test_option_sets_parse_as_python_literals():
    assert _options('sm90_tile_n=256:fast_math=True:sm90_schedule="pingpong"') == \
        {"sm90_tile_n": 256, "fast_math": True, "sm90_schedule": "pingpong"}
    assert _options("") == {}
    assert split_spec("cupy:tile=(128, 256):fast_math=True") == ("cupy", {"tile": (128, 256), "fast_math": True})
    assert parse_options(["aux_ring=False", "", "mode=fast"]) == {"aux_ring": False, "mode": "fast"}


def test_agreement_gate_flags_nan_and_wrong_values():
    torch = pytest.importorskip("torch")
    from bench.checks import check_outputs
    ref = {"D": torch.ones(4, 8, dtype=torch.float16).float(), "S": torch.arange(4, dtype=torch.float32) + 1}
    same = {k: v.clone().half() if k == "D" else v.clone() for k, v in ref.items()}
    assert check_outputs(same, ref, lambda t: t.float())[0] == ""
    poisoned = {k: v.clone() for k, v in same.items()}
    poisoned["D"][1, 2] = float("nan")                        # an element the kernel never wrote
    assert check_outputs(poisoned, ref, lambda t: t.float())[0].startswith("D: 1 NaN/Inf")
    off = {"D": same["D"], "S": ref["S"] * 1.05}              # a reduction 5 % off
    assert check_outputs(off, ref, lambda t: t.float())[0].startswith("S:")
