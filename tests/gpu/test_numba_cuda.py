"""numba_cuda on a real GPU: many trees, dtypes, shapes (edge tiles, K tails), batched and
batch-shared operands, column-major aux, every reduction, deterministic bit-identity, poisoned
outputs, CuPy/torch inputs used in place, and the compile cache."""
import os
import sys

import numpy as np
import pytest

import evt_core

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "numba_cuda"))
from trees import case, compare, relayout  # noqa: E402

pytestmark = pytest.mark.gpu


def _gpu_or_skip():
    from evt_backends.numba_cuda.backend import NumbaCudaBackend
    ok = NumbaCudaBackend().available()
    if not ok or os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        pytest.skip(f"needs a CUDA GPU: {ok.reason or 'simulator selected'}")


@pytest.fixture(autouse=True)
def poisoned(monkeypatch):
    _gpu_or_skip()
    monkeypatch.setenv("EVT_POISON", "1")


SHAPES = [(0, 128, 128, 64), (2, 200, 136, 72), (0, 77, 45, 40), (3, 129, 257, 96), (0, 64, 64, 70), (0, 1, 9, 8)]


@pytest.mark.parametrize("sm90", [True, False], ids=["sm90", "mma"])
@pytest.mark.parametrize("ab", ["float16", "bfloat16", "float32"])
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bias_relu_stats(ab, shape, sm90):
    tree, A, B, inputs = case("bias_relu_stats", *shape, ab=ab, out="float16")
    got = evt_core.compile(tree, backend="numba_cuda", sm90=sm90)(A, B, **inputs)
    compare(got, evt_core.interpret(tree, A, B, **inputs), f"{ab} {shape}")


@pytest.mark.parametrize("name,L", [("activations", 0), ("activations", 2), ("means", 3), ("dgelu", 0), ("dgelu", 2)])
@pytest.mark.parametrize("ab", ["float16", "bfloat16"])
@pytest.mark.parametrize("det", [False, True])
@pytest.mark.parametrize("sm90", [True, False], ids=["sm90", "mma"])
def test_trees(name, L, ab, det, sm90):
    tree, A, B, inputs = case(name, L, 150, 260, 48, ab=ab, out="bfloat16" if ab == "bfloat16" else "float16")
    got = evt_core.compile(tree, backend="numba_cuda", deterministic=det, sm90=sm90)(A, B, **inputs)
    compare(got, evt_core.interpret(tree, A, B, **inputs), f"{name} {ab} det={det}")


@pytest.mark.parametrize("layout", ["colmajor_aux", "shared_A", "A_colmajor", "B_colmajor", "simt_forced"])
def test_layouts(layout):
    tree, A, B, inputs = case("bias_relu_stats", 2, 190, 140, 64, col_major_aux=layout == "colmajor_aux")
    opts = {"simt": True} if layout == "simt_forced" else {}
    A, B = relayout(layout, A, B)
    got = evt_core.compile(tree, backend="numba_cuda", **opts)(A, B, **inputs)
    compare(got, evt_core.interpret(tree, A, B, **inputs), layout)


# Both tensor-core k-loops: fast_mainloop=True (the default: hoisted addresses, no spills) and
# False (the original loop). The main differential cases again, one compile per operand-layout variant: fp16 over every shape (edge tiles, K tails,
# batches), bf16, A M-contiguous (ldmatrix.trans for A), B K-contiguous, and deterministic
# reductions over every axis kind.
# Every shape here takes the tensor-core path (rows 16-byte aligned), which the test asserts.
MMA_SHAPES = [(0, 128, 128, 64), (2, 200, 136, 72), (0, 77, 48, 40), (3, 129, 264, 96), (0, 8, 16, 8)]
FAST = [("f16", s) for s in MMA_SHAPES] + [("bf16", MMA_SHAPES[1]), ("bf16", MMA_SHAPES[3]),
                                           ("A_colmajor", (2, 200, 136, 72)), ("B_colmajor", (3, 129, 257, 96)),
                                           ("means_det", (3, 150, 264, 48))]


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "original"])
@pytest.mark.parametrize("what,shape", FAST, ids=lambda x: x if isinstance(x, str) else "x".join(map(str, x)))
def test_fast_mainloop(what, shape, fast):
    name = "means" if what == "means_det" else "bias_relu_stats"
    ab = "bfloat16" if what == "bf16" else "float16"
    tree, A, B, inputs = case(name, *shape, ab=ab, out="float16")
    if what == "A_colmajor":
        A = np.ascontiguousarray(A.transpose(0, 2, 1)).transpose(0, 2, 1)
    if what == "B_colmajor":
        B = np.ascontiguousarray(B.transpose(0, 2, 1)).transpose(0, 2, 1)
    k = evt_core.compile(tree, backend="numba_cuda", fast_mainloop=fast, deterministic=what == "means_det", sm90=False)
    compare(k(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), f"fast_mainloop={fast} {what} {shape}")
    hoisted = any(key.startswith("source_mma") and "a_gp = a_gp + a_gk" in v for key, v in k.stages.items())
    assert any(key.startswith("source_mma") for key in k.stages) and hoisted == fast


def test_random_floats_fp16():
    tree, A, B, inputs = case("bias_relu_stats", 0, 300, 200, 256)
    rng = np.random.default_rng(1)
    A, B = (rng.standard_normal(x.shape).astype(np.float16) for x in (A, B))
    got = evt_core.compile(tree, backend="numba_cuda")(A, B, **inputs)
    ref = evt_core.interpret(tree, A, B, **inputs)
    for k in ("F", "F_colmax"):
        rel = np.linalg.norm(got[k].astype(np.float64) - ref[k]) / np.linalg.norm(ref[k].astype(np.float64))
        assert rel < 1e-4, (k, rel)


def test_deterministic_is_bit_identical():
    tree, A, B, inputs = case("means", 4, 333, 270, 96, seed=3)
    rng = np.random.default_rng(2)
    A, B = (rng.standard_normal(x.shape).astype(np.float16) for x in (A, B))
    k = evt_core.compile(tree, backend="numba_cuda", deterministic=True)
    runs = [k(A, B, **inputs) for _ in range(3)]
    for name in runs[0]:
        bits = [np.asarray(r[name]).reshape(-1).view(np.uint8) for r in runs]
        assert all(np.array_equal(bits[0], x) for x in bits[1:]), name


def test_second_compile_does_not_recompile():
    from evt_backends.numba_cuda.runtime import build
    tree, A, B, inputs = case("activations", 0, 64, 64, 32)
    evt_core.compile(tree, backend="numba_cuda", deterministic=True)(A, B, **inputs)
    before = build.COMPILES["count"]
    evt_core.compile(tree, backend="numba_cuda", deterministic=True)(A, B, **inputs)
    assert build.COMPILES["count"] == before


def test_cupy_inputs_stay_on_device():
    cp = pytest.importorskip("cupy")
    tree, A, B, inputs = case("bias_relu_stats", 2, 130, 120, 64)
    ref = evt_core.interpret(tree, A, B, **inputs)
    dev = {k: cp.asarray(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    got = evt_core.compile(tree, backend="numba_cuda")(cp.asarray(A), cp.asarray(B), **dev)
    assert all(isinstance(v, cp.ndarray) for v in got.values())
    compare({k: cp.asnumpy(v) for k, v in got.items()}, ref, "cupy")


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_torch_inputs_stay_on_device(dt):
    torch = pytest.importorskip("torch")
    tree, A, B, inputs = case("bias_relu_stats", 2, 130, 120, 64, ab=dt)
    ref = evt_core.interpret(tree, A, B, **inputs)

    def t(x):
        return torch.from_numpy(np.asarray(x, np.float32)).to(getattr(torch, str(x.dtype)) if x.dtype != np.float32
                                                                else torch.float32).cuda()
    dev = {k: t(v) if isinstance(v, np.ndarray) else v for k, v in inputs.items()}
    got = evt_core.compile(tree, backend="numba_cuda")(t(A), t(B), **dev)
    assert all(isinstance(v, torch.Tensor) and v.is_cuda for v in got.values())
    compare({k: v.float().cpu().numpy() for k, v in got.items()}, ref, f"torch {dt}")
