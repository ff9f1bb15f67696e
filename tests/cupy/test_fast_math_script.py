"""scripts/fast_math_error.py without a GPU: its kernels compile, its error measures are right."""
import importlib.util
import os

import numpy as np
import pytest

from bench.nvcc_check import find_tool

_PATH = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "fast_math_error.py")


def _script():
    spec = importlib.util.spec_from_file_location("fast_math_error", _PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_fast_op_has_a_reference_and_a_kernel():
    from evt_backends.cupy.codegen.spelling import FAST_SPELLING
    m = _script()
    src = m.kernel_source()
    for op in FAST_SPELLING:
        assert op.value in m.REFERENCE and f"k_{op.value}(" in src


def test_error_measures():
    m = _script()
    ref = np.array([1.0, 2.0, 1e-6, 70000.0])
    got = np.array([1.0 + 2 ** -11, 2.0, 1e-6, 0.0], np.float32)
    abs_, rel, ulp = m.errors(got, ref)
    assert abs_ == pytest.approx(2 ** -11) and rel == pytest.approx(2 ** -11) and ulp == pytest.approx(0.5)
    x = m.sweep(-1.0, 1.0, 101)
    assert x.min() == -1.0 and x.max() == 1.0 and np.all(np.diff(x) > 0) and x.size > 101
    assert "| tanh | [-1, 1] | 3 |" in m.table([("tanh", (-1.0, 1.0), 3, (1e-4, 2e-4, 0.3), (0, 0, 0))])


@pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")
def test_kernels_compile(tmp_path):
    import subprocess
    cu = tmp_path / "k.cu"
    cu.write_text(_script().kernel_source())
    r = subprocess.run([find_tool("nvcc"), "-arch=sm_90a", "-cubin", "-std=c++17", "-o", str(tmp_path / "k.cubin"),
                        str(cu)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
