"""The bad-input table: every row is a call a user might make with a wrong (or odd but valid)
input, the EvtError subclass it must raise and a fragment of the message naming the culprit
(or, for valid inputs, a result equal to the reference's). Rows live in tests/core/bad_inputs/
(trace-time, call-time per backend, environment/plugins/cache); numba_cuda rows run in one
CUDA-simulator subprocess."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evt_core import ops
from evt_core.errors import EvtError
from evt_core.tree import numpy_hints

from .bad_inputs import call_rows, env_rows, trace_rows
from .bad_inputs.common import check

ROOT = Path(__file__).parents[2]
HOST_ROWS = trace_rows.ROWS + call_rows.rows("numpy") + env_rows.ROWS
SIM_ROWS = call_rows.rows("numba_cuda", simulator=True)


def test_the_table_is_large_and_well_formed():
    rows = HOST_ROWS + SIM_ROWS
    assert len(rows) >= 120, len(rows)
    assert len({r.name for r in rows}) == len(rows), "row names must be unique"
    for r in rows:
        assert r.expect is None or issubclass(r.expect, (EvtError, Warning)), r.name
        assert r.expect is None or r.fragment, f"{r.name}: a refusal must say what it names"


@pytest.mark.parametrize("row", HOST_ROWS, ids=lambda r: r.name)
def test_row(row):
    check(row)


@pytest.fixture(scope="module")
def simulator_results(tmp_path_factory):
    pytest.importorskip("numba")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "EVT_CACHE_DIR": str(tmp_path_factory.mktemp("cache")),
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, "-m", "tests.core.bad_inputs.sim_rows"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=300)
    lines = {}
    for line in r.stdout.splitlines():
        status, _, rest = line.partition(" ")
        name, _, why = rest.partition(": ")
        lines[name] = (status, why)
    assert lines, r.stdout + r.stderr
    return lines


@pytest.mark.parametrize("row", SIM_ROWS, ids=lambda r: r.name)
def test_numba_cuda_row_in_the_simulator(row, simulator_results):
    status, why = simulator_results.get(row.name, ("missing", "the row did not run"))
    assert status == "ok", why


def test_numpy_hints_name_only_real_ops():
    """A hint never suggests an op that does not exist (np.sum once suggested `ops.add`)."""
    for name in list(numpy_hints._NUMPY_EQUIVALENT) + ["sin", "relu", "tanh"]:
        msg = numpy_hints.numpy_hint(name)
        for word in msg.replace("(", " ").replace(",", " ").split():
            if word.startswith("ops."):
                assert word[4:] in ops.__all__, (name, msg)
