"""The generated SIMT kernels, run under the CUDA simulator in a subprocess (the simulator must
be chosen before numba.cuda is imported). A handful of tiny non-square cases, a few seconds."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def _run_simulated(script, tmp_path):
    """Run `script` under the CUDA simulator in a fresh process; its stdout."""
    pytest.importorskip("numba")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "EVT_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(HERE / script)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_simulator_cases(tmp_path):
    assert _run_simulated("sim_cases.py", tmp_path).count("ok ") == 6


def test_simulator_layout_cases(tmp_path):
    """Every layout op at several simulator tiles per axis (tests/layout_cases.py)."""
    from tests import layout_cases
    assert _run_simulated("sim_layouts.py", tmp_path).count("ok ") == len(layout_cases.instances())
