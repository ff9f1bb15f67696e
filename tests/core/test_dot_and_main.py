"""Tree.to_dot and `python -m evt_core` (no torch needed)."""
import subprocess
import sys

import numpy as np

import evt_core
from evt_core import ops


def _epi(accum, bias):
    z = accum + bias
    relu = ops.relu(z)
    colsum = ops.sum(z, over="M")
    return relu, colsum


def test_tree_to_dot_draws_one_kernel():
    M, N = 8, 4
    tree = evt_core.trace(_epi, {"accum": np.empty((M, N), np.float32), "bias": np.zeros(N, np.float32),
                                 "relu": np.empty((M, N), np.float32), "colsum": np.empty(N, np.float32)})
    dot = tree.to_dot("epi")
    assert dot.startswith('digraph "epi"') and dot.count("subgraph cluster_") == 1
    for label in ("accum = A @ B", "load bias", "store relu", "store colsum", "sum over M"):
        assert label in dot
    assert dot.count("{") == dot.count("}")


def test_python_m_evt_core_lists_backends():
    out = subprocess.run([sys.executable, "-m", "evt_core"], capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert any(line.split()[:2] == ["numpy", "available"] for line in lines)
    for name in evt_core.backends():
        assert any(line.strip().startswith(name) for line in lines)
    assert "torch integration" in out.stdout


def test_evt_core_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"       # makes `import torch` fail
            "import evt_core, evt_core.torch, evt_core.partition\n"
            "from evt_core.__main__ import main; main()\n"
            "assert 'torch' not in [m for m in sys.modules if sys.modules[m] is not None]\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
