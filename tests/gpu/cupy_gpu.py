"""The guard both cupy GPU test modules start with: CuPy and a CUDA device, or skip the module."""
import pytest


def require():
    """CuPy, or skip the calling module (no CuPy, or no CUDA device)."""
    cp = pytest.importorskip("cupy", reason="cupy is not installed")
    try:
        have = cp.cuda.runtime.getDeviceCount() > 0
    except Exception:  # noqa: BLE001 - any driver failure means no usable device
        have = False
    if not have:
        pytest.skip("no CUDA device", allow_module_level=True)
    return cp
