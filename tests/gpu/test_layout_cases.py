"""Every layout op on both GPU backends at sizes of several tiles in every dimension (M and N
cross 128/256-wide tiles, K has a tail), fp16 and bf16, NumPy and device inputs, poisoned
outputs, exact comparison with the reference (integer inputs). The wrong results of
2026-12-01 (a reshaped batched output written at one element; a column reshaped from a flat
input read at the wrong rows) are cases here."""
import os

import pytest

import evt_core
from tests import layout_cases

pytestmark = pytest.mark.gpu
SIZES = [(6, 520, 600, 200), (6, 264, 136, 72)]


def _backend_or_skip(name):
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip("simulator selected")
    status = evt_core.backends().get(name)
    if not status:
        pytest.skip(f"{name} unavailable: {getattr(status, 'reason', 'not installed')}")


def _device(x):
    """A CuPy copy (both backends take CuPy arrays in place)."""
    if not hasattr(x, "shape"):
        return x
    import cupy as cp
    return cp.asarray(x)


@pytest.mark.parametrize("backend", ["numba_cuda", "cupy"])
@pytest.mark.parametrize("name,L", layout_cases.instances())
@pytest.mark.parametrize("size", SIZES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
def test_layout_case(backend, name, L, size, ab, monkeypatch):
    _backend_or_skip(backend)
    monkeypatch.setenv("EVT_POISON", "1")
    _, M, N, K = size
    tree, A, B, inputs = layout_cases.build(name, L, M, N, K, ab=ab)
    ref = evt_core.interpret(tree, A, B, **inputs)
    kernel = evt_core.compile(tree, backend=backend)
    layout_cases.check(kernel(A, B, **inputs), ref, f"{backend} {name} L={L} {size} {ab} numpy")
    if ab == "float16" and name != "reshaped_permuted_in":   # device arrays: no hidden copies
        dev = {k: _device(v) for k, v in inputs.items()}
        got = kernel(_device(A), _device(B), **dev)
        layout_cases.check(got, ref, f"{backend} {name} L={L} {size} device")
