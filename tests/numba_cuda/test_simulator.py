"""The generated SIMT kernels, run under the CUDA simulator in a subprocess (the simulator must
be chosen before numba.cuda is imported). A handful of tiny non-square cases, a few seconds."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parents[1]


def test_simulator_cases(tmp_path):
    pytest.importorskip("numba")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "EVT_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(HERE / "sim_cases.py")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.count("ok ") == 5, r.stdout


def test_simulator_layout_cases(tmp_path):
    """Every layout op at several simulator tiles per axis (tests/layout_cases.py)."""
    pytest.importorskip("numba")
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "EVT_CACHE_DIR": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])}
    r = subprocess.run([sys.executable, str(HERE / "sim_layouts.py")], env=env, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    from tests import layout_cases
    assert r.stdout.count("ok ") == len(layout_cases.instances()), r.stdout
