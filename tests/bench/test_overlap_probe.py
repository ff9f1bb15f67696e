"""CPU: bench.overlap_probe's kernels build for sm_90a as the probe means them (no GPU). A probe
whose wgmmas were serialised by ptxas, whose registers spilled, or whose piece ptxas moved out
from under the wgmma group would measure something else than it says."""
import pytest

from bench import overlap_probe as probe
from bench.nvcc_check import build, find_tool, work_under_wgmma

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")


@pytest.fixture(scope="module")
def reports():
    src = probe.source()
    return {k: build(src, kernel=k) for k in ("probe_5_0", "probe_1_4", "probe_3_3", "probe_0_1")}


def test_no_spills_and_no_serialised_wgmma(reports):
    for name, rep in reports.items():
        assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), (name, rep)
        assert not [w for w in rep.warnings if "C7518" in w or "C7510" in w], (name, rep.warnings)


def test_pieces_sit_under_their_wgmma_group(reports):
    if not reports["probe_5_0"].listing:
        pytest.skip("cuobjdump not found")
    # "both", W2's piece: the set-0 fill (no work after it) and then one group per round, the
    # piece's arithmetic, loads and stores between the group's HGMMAs and its wait
    groups = work_under_wgmma(reports["probe_5_0"].listing)
    assert len(groups) >= 2 and max(groups) >= 50, groups
    # "interleaved": a quarter of the piece after each single wgmma
    inter = reports["probe_1_4"].listing
    assert sum(op.startswith("HGMMA") for op in inter) >= 5, inter
    assert max(work_under_wgmma(inter)) >= 16
    # "mma": nothing but the k-block between issue and wait
    assert max(work_under_wgmma(reports["probe_0_1"].listing)) == 0
