"""Layout ops inside fused GEMM groups: a view of the accumulator (the (B*S, H) -> (B, S, H) of
every transformer projection) becomes store strides and fuses; a head split that no strides
can express is refused at trace time, so the group runs unfused with the reason; bf16 aux
inputs load. Each fused result equals the unpartitioned evaluation."""
import numpy as np

from evt_core import partition as P
from helpers import assert_close, make_inputs


def _projection(dtype="float16", split_heads=False):
    g = P.Graph()
    x = g.input("x", (64, 32), dtype)
    w = g.input("w", (48, 32), dtype)
    b = g.input("b", (48,), dtype)
    r = g.input("r", (4, 16, 48), dtype)
    y = g.add("view", g.add("addmm", b, x, g.add("t", w)), (4, 16, 48))
    if split_heads:
        y = g.add("permute", g.add("view", y, (4, 16, 3, 16)), (0, 2, 1, 3))
        g.output(g.add("relu", y))
    else:
        g.output(g.add("relu", g.add("add", y, r)))
    return g


def _fused_run(g):
    inputs = make_inputs(g)
    plan = P.partition(g)
    got = P.run(plan, inputs, backend="numpy")
    want = P.evaluate(g, inputs)
    for o in g.outputs:
        assert_close(got[o], want[o], what=o)
    return got


def test_view_of_the_accumulator_fuses():
    got = _fused_run(_projection())
    assert got.fused and not got.unfused


def test_bf16_aux_inputs_fuse():
    got = _fused_run(_projection("bfloat16"))
    assert got.fused and not got.unfused


def test_head_split_is_refused_with_the_reason():
    got = _fused_run(_projection(split_heads=True))
    reasons = list(got.unfused.values())
    assert not got.fused and any("no strides can express" in r for r in reasons), reasons


def test_unsqueeze_and_squeeze_of_the_accumulator_fuse_as_views():
    """Adding or removing size-1 dims keeps every element's row-major position, so unsqueeze and
    squeeze lower like a view (store or load strides) and the group fuses."""
    g = P.Graph()
    x = g.input("x", (64, 32), "float16")
    w = g.input("w", (48, 32), "float16")
    r = g.input("r", (1, 64, 48), "float16")
    acc = g.add("mm", x, g.add("t", w))
    y = g.add("add", g.add("unsqueeze", acc, 0), r)            # (1, 64, 48)
    g.output(g.add("relu", g.add("squeeze", y, 0)))              # back to (64, 48)
    got = _fused_run(g)
    assert got.fused and not got.unfused, got.unfused
