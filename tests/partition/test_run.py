import pytest

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES, small
from helpers import assert_close, make_inputs


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("with_passes", [False, True])
def test_run_matches_unpartitioned_evaluation(name, with_passes):
    g = small(name)
    inputs = make_inputs(g)
    want = P.evaluate(g, inputs)
    graph = P.run_pipeline(g) if with_passes else g
    plan = P.partition(graph)
    plan.check()
    got = P.run(plan, inputs, backend="numpy")
    for o_before, o_after in zip(g.outputs, graph.outputs):
        if graph.nodes[o_after].op == "full":      # an eliminated loss
            continue
        assert_close(got[o_after], want[o_before], what=f"{name}:{o_before}")
    gemm_groups = [k for k, grp in enumerate(plan.groups)
                   if any(graph.nodes[n].op in ("mm", "bmm", "addmm") for n in grp)]
    assert set(got.fused) | set(got.unfused) == set(gemm_groups)
    if name in ("mlp_block", "cross_entropy_head"):
        assert not got.unfused
