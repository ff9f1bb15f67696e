"""CPU checks of the overlapped cooperative schedule (sm90_schedule="overlap",
codegen/consumer_overlap.py): which calls take it (select.overlap_refusal), the epilogue cut into
pieces without losing or reordering a line, and the ring invariant that keeps a tile's aux stages
from blocking the next tile's k-blocks. Its SASS is checked in test_sm90_codegen.py (the overlap_*
kernels), its results on the H200 in tests/gpu/test_numba_sm90.py."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from evt_backends.numba_cuda.codegen import epilogue_fragment as ef  # noqa: E402
from evt_backends.numba_cuda.codegen.consumer_overlap import PIECES, consumer_overlap, pieces, preloaded  # noqa: E402
from evt_backends.numba_cuda.codegen.frag_layout import FragLayout  # noqa: E402
import numpy as np  # noqa: E402

from evt_core import ops  # noqa: E402
from test_sm90_wide_tile import PROGRAMS, _choose, _trace, gpu  # noqa: E402,F401 - gpu: the fixture


def _two_inputs(accum, g, x):
    dx = accum * g + x
    return {"dx": dx, "s": ops.sum(dx, over="M")}


def _three_inputs(accum, g, x, y):
    return {"D": accum * g + x * y}


F16 = np.float16
MN = np.empty((64, 64), F16)
PROGRAMS = {**PROGRAMS,
            "ln_backward": _trace(_two_inputs, {"g": MN, "x": MN}, {"dx": MN, "s": np.empty(64, np.float32)}),
            "three_inputs": _trace(_three_inputs, {"g": MN, "x": MN, "y": MN}, {"D": MN})}

OVERLAPPABLE = ["bare", "bias_gelu", "row_col", "residual", "row_sums", "two_outputs", "three_outputs", "w4",
                "col_sums"]


@pytest.mark.parametrize("name", OVERLAPPABLE)
def test_overlap_is_taken_where_the_fragment_epilogue_runs_128_wide(gpu, name):
    v, note = _choose(name, 4096, 4096, 1024, schedule="overlap")
    assert v[0] == "sm90" and v[11] is True and v[9] == 128 and v[5] is False, (v, note)
    assert "tile 128x128x64" in note and "overlapped cooperative schedule" in note, note


@pytest.mark.parametrize("name,kw,why", [
    ("bare", {"tile_n": 256}, "a 128 x 256 tile"),
    ("fp32_residual", {}, "copied by cp.async"),
    ("bias_gelu", {"epilogue": "staged"}, "the staged epilogue"),
])
def test_overlap_not_taken_says_why_and_runs_cooperative(gpu, name, kw, why):
    v, note = _choose(name, 4096, 4096, 1024, schedule="overlap", **kw)
    assert v[0] == "sm90" and v[11] is False and v[5] is False, (v, note)
    assert f"cooperative (sm90_schedule='overlap' not taken: " in note and why in note, note


@pytest.mark.parametrize("name", ["bare", "auto_kinds"])
def test_other_schedules_never_overlap(gpu, name):
    for schedule in ("auto", "cooperative", "pingpong"):
        for p in (OVERLAPPABLE if name == "auto_kinds" else [name]):
            v, note = _choose(p, 4096, 4096, 1024, schedule=schedule)
            assert v[11] is False and "overlap" not in note, (schedule, p, note)


@pytest.mark.parametrize("name", OVERLAPPABLE)
@pytest.mark.parametrize("n", [1, 3, 4, 8, 16])
@pytest.mark.parametrize("det", [False, True])
def test_epilogue_pieces_are_the_whole_epilogue_in_order(name, n, det):
    """fragment_chunks(n) joined is fragment_lines: no line lost, doubled or moved; the first
    piece sets the tile up, the last stores it."""
    p = PROGRAMS[name]
    lay = FragLayout(p, 128, det, False, aux_ring=True)
    whole = ef.fragment_lines(p, lay, ["acc"], det)
    parts = ef.fragment_chunks(p, lay, ["acc"], det, n)
    assert len(parts) == n and sum(parts, []) == whole
    assert all(sum("epi_group(" in x for x in part) in (16 // n, 16 // n + 1) for part in parts), n
    assert any("bulk_commit()" in x for x in parts[-1])


@pytest.mark.parametrize("name", OVERLAPPABLE + ["ln_backward", "three_inputs"])
def test_ring_invariant_pieces_fit_before_the_aux_release(name):
    """Until a tile's aux stages are released the producer can fill only stages - aux_stages of
    the next tile's k-blocks, and piece c waits on k-block c. One or two ring inputs are read
    whole by the first piece (32 words a thread each) and released before its first column
    group, so every piece may wait; three are released after the last piece, and the pieces
    stay within the ring (else the consumer waits on a k-block the producer cannot load)."""
    p = PROGRAMS[name]
    lay = FragLayout(p, 128, False, False, aux_ring=True)
    n = pieces(lay)
    assert 1 <= n <= PIECES
    src = [x.strip() for x in consumer_overlap(p, (False, False), False, lay)]
    gos = [i for i, x in enumerate(src) if x.startswith("go = more & (kb < ktiles)")]
    assert len(gos) == n
    if not lay.aux_ring:
        assert not any("aux_ring" in x for x in src)
        return
    release = next(i for i, x in enumerate(src) if "aux_ring: the warpgroup's reads" in x)
    rest = src.index("while kb < ktiles:")
    first_group = next(i for i, x in enumerate(src) if "epi_group(" in x)
    if preloaded(lay):
        assert len(lay.ring_inputs) <= 2 and n == PIECES
        words = [i for i, x in enumerate(src) if x.startswith("xw") and "lds_u32(" in x]
        assert len(words) == 32 * len(lay.ring_inputs) and gos[0] < max(words) < release < first_group, \
            (words, release, first_group)
    else:
        assert len(lay.ring_inputs) == 3 and n <= lay.stages - lay.aux_stages, (lay.stages, lay.aux_stages)
        assert gos[-1] < release < rest      # released after the last piece, before the k-loop goes on


def test_column_vector_of_the_next_tile_is_loaded_after_the_first_piece():
    """The first piece stores this tile's bias to shared memory; only then may its registers
    take the next tile's (loaded under the rest of the epilogue and the next mainloop)."""
    p = PROGRAMS["two_outputs"]
    lay = FragLayout(p, 128, False, False, aux_ring=True)
    src = [x.strip() for x in consumer_overlap(p, (False, False), False, lay)]
    gos = [i for i, x in enumerate(src) if x.startswith("go = more")]
    store = next(i for i, x in enumerate(src) if x.startswith("sts(sbase + ") and "bv0" in x)
    load_next = next(i for i, x in enumerate(src) if x.startswith("bvn0 = "))
    assert gos[0] < store < load_next < gos[1]
    assert "(more) & (n0_n + tid < N)" in src[load_next], src[load_next]
    assert src.index("bv0 = bvn0") > src.index("acc = accn")
