from pathlib import Path

import pytest

from evt_core import partition as P
from evt_core.partition.examples import EXAMPLES

JSON = Path(P.__file__).parent / "examples" / "json"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_json_exports_match_builders(name):
    g = EXAMPLES[name]()
    assert P.Graph.from_json((JSON / f"{name}.json").read_text()) == g
    assert P.Graph.from_json((JSON / f"{name}.passes.json").read_text()) == P.run_pipeline(g)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_examples_partition_legally_and_optimally_fast(name):
    plan = P.partition(P.run_pipeline(EXAMPLES[name]()), cache=None)
    plan.check()
    assert plan.optimal and plan.stats.time_s < 1.0
