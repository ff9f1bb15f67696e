"""GPU differential tests of the cupy backend against evt_core.interpret (the reference).

Small-integer A/B make the GEMM exact in fp32, so only epilogue math and rounding need a
tolerance (toolchain-notes §5.1). Shapes are non-square with partial tiles in M, N and K;
run with EVT_POISON=1 so any element a kernel forgets to write is NaN.
"""
import os

import numpy as np
import pytest

import evt_core
from evt_core import ops
from evt_core.dtypes import DTYPES

cp = pytest.importorskip("cupy", reason="cupy is not installed")
pytestmark = pytest.mark.gpu
try:
    _HAVE_GPU = cp.cuda.runtime.getDeviceCount() > 0
except Exception:  # noqa: BLE001
    _HAVE_GPU = False
if not _HAVE_GPU:
    pytest.skip("no CUDA device", allow_module_level=True)

TOL = {"float16": (2e-3, 1e-4), "bfloat16": (1.6e-2, 1e-3), "float32": (2e-5, 1e-5)}
RNG = np.random.default_rng(0)


def ints(shape, dtype, lo=-2, hi=3):
    return RNG.integers(lo, hi, size=shape).astype(np.float32).astype(DTYPES[dtype])


def vals(shape, dtype):
    return (RNG.standard_normal(shape).astype(np.float32) * 0.5).astype(DTYPES[dtype])


# ---- epilogues: (function, example-builder(L, M, N, dt, batched) -> dict of inputs/outputs) ----
def epi_paper(accum, C, alpha, bias):
    F = alpha * accum + C
    D = ops.relu(F + bias) + 1.0
    F_colmax = ops.amax(F, over="M")
    return D, F, F_colmax


def ex_paper(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return ({"C": vals(lmn, dt), "alpha": 0.5, "bias": vals((N,), dt)},
            {"D": np.empty(lmn, DTYPES[dt]), "F": np.empty(lmn, DTYPES[dt]),
             "F_colmax": np.empty((L, N) if batched else (N,), np.float32)})


def epi_bias_gelu(accum, bias):
    D = ops.gelu(accum + bias)
    return D


def ex_bias_gelu(L, M, N, dt, batched):
    return {"bias": vals((N,), dt)}, {"D": np.empty((L, M, N) if batched else (M, N), DTYPES[dt])}


def epi_math(accum, Y, s):
    x = accum * 0.05
    p = ops.abs(x) + 1.0
    D = (ops.gelu_tanh(x) + ops.sigmoid(x) - ops.silu(x) + ops.tanh(x) + ops.exp(-p) + ops.log(p)
         + ops.sqrt(p) + ops.rsqrt(p) + ops.maximum(x, Y) - ops.minimum(x, Y) + (x > Y) + (x <= Y) * s
         + ops.where(x > 0.0, x, Y) + x / p + ops.gelu_tanh_grad(x))
    return D


def ex_math(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return {"Y": vals(lmn, dt), "s": 0.25}, {"D": np.empty(lmn, np.float32)}


def epi_reduce(accum, scale):
    v = accum * scale
    row_sum = ops.sum(v, over="N")
    col_mean = ops.mean(v, over="M")
    vmax = ops.amax(v, over=("M", "N"))
    row_min = ops.amin(v, over="N")
    return v, row_sum, col_mean, vmax, row_min


def ex_reduce(L, M, N, dt, batched):
    if batched:
        return ({"scale": vals((L, M, 1), dt)},
                {"v": np.empty((L, M, N), DTYPES[dt]), "row_sum": np.empty((L, M), np.float32),
                 "col_mean": np.empty((L, N), DTYPES[dt]), "vmax": np.empty((L,), np.float32),
                 "row_min": np.empty((L, M), np.float32)})
    return ({"scale": vals((M, 1), dt)},
            {"v": np.empty((M, N), DTYPES[dt]), "row_sum": np.empty((M,), np.float32),
             "col_mean": np.empty((N,), DTYPES[dt]), "vmax": np.empty((), np.float32),
             "row_min": np.empty((M,), np.float32)})


def epi_colmajor(accum, C, colv):
    D = accum + C * colv
    return D


def ex_colmajor(L, M, N, dt, batched):
    C = np.asfortranarray(vals((M, N), dt))
    return {"C": C, "colv": vals((M, 1), "float32")}, {"D": np.asfortranarray(np.empty((M, N), DTYPES[dt]))}


EPILOGUES = {"paper": (epi_paper, ex_paper), "bias_gelu": (epi_bias_gelu, ex_bias_gelu),
             "math": (epi_math, ex_math), "reduce": (epi_reduce, ex_reduce), "colmajor": (epi_colmajor, ex_colmajor)}


def make(name, L, M, N, K, dt, batched):
    fn, ex = EPILOGUES[name]
    inputs, outs = ex(L, M, N, dt, batched)
    acc = np.empty((L, M, N) if batched else (M, N), np.float32)
    tree = evt_core.trace(fn, {"accum": acc, **inputs, **outs})
    A = ints((L, M, K) if batched else (M, K), dt)
    B = ints((L, K, N) if batched else (K, N), dt)
    return tree, A, B, inputs


def check(got, ref, K):
    for name, r in ref.items():
        g = got[name]
        g = cp.asnumpy(g) if isinstance(g, cp.ndarray) else np.asarray(g)
        if g.dtype == np.uint16:   # a CuPy without bf16 hands back the bits
            g = g.view(DTYPES["bfloat16"])
        assert g.shape == r.shape, name
        dt = r.dtype.name if r.dtype.name in TOL else "bfloat16"
        rtol, atol = TOL[dt]
        g32, r32 = g.astype(np.float32), r.astype(np.float32)
        assert not np.isnan(g32).any() or np.isnan(r32).any(), f"{name}: NaN left (unwritten element?)"
        np.testing.assert_allclose(g32, r32, rtol=rtol, atol=atol + 1e-5 * K, err_msg=name)


SHAPES = [(1, 200, 328, 72), (1, 256, 512, 128), (1, 37, 24, 8)]
CASES = [(e, dt, ml, s) for e in ("paper", "bias_gelu", "reduce", "colmajor") for dt in ("float16", "bfloat16")
         for ml in ("sm80", "sm90") for s in SHAPES] + [("math", "float32", "sm80", s) for s in SHAPES]


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}-{'x'.join(map(str, c[3]))}")
def test_matches_reference(case):
    name, dt, ml, (L, M, N, K) = case
    tree, A, B, inputs = make(name, L, M, N, K, dt, batched=False)
    kern = evt_core.compile(tree, backend="cupy", mainloop=ml, autotune=False)
    got = kern(A, B, **inputs)
    check(got, evt_core.interpret(tree, A, B, **inputs), K)
    assert not kern.run.watchdog_fired()


@pytest.mark.parametrize("name", ["paper", "reduce", "bias_gelu"])
@pytest.mark.parametrize("ml", ["sm80", "sm90"])
def test_batched(name, ml):
    tree, A, B, inputs = make(name, 3, 130, 264, 64, "float16", batched=True)
    kern = evt_core.compile(tree, backend="cupy", mainloop=ml, autotune=False)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 64)


def test_shared_a_across_batches():
    tree, A, B, inputs = make("paper", 2, 128, 256, 64, "float16", batched=True)
    A2 = A[0]                                   # 2-D A: L stride 0
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    check(kern(A2, B, **inputs), evt_core.interpret(tree, A2, B, **inputs), 64)


def test_unaligned_k_falls_back_to_sm80():
    tree, A, B, inputs = make("paper", 1, 100, 90, 37, "float16", batched=False)
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 37)
    assert kern.run.last.spec.mainloop == "sm80"


def test_k_major_b():
    tree, A, B, inputs = make("bias_gelu", 1, 256, 384, 128, "float16", batched=False)
    Bt = np.ascontiguousarray(B.T).T                  # (K, N) view of an (N, K) array
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    check(kern(cp.asarray(A), cp.asarray(Bt), bias=cp.asarray(inputs["bias"])), evt_core.interpret(tree, A, B, **inputs), 128)
    assert kern.run.last.spec.b_kmajor


@pytest.mark.parametrize("ml", ["sm80", "sm90"])
def test_deterministic_is_bit_identical(ml):
    tree, A, B, inputs = make("reduce", 2, 300, 520, 64, "float16", batched=True)
    A = vals(A.shape, "float16"); B = vals(B.shape, "float16")
    kern = evt_core.compile(tree, backend="cupy", mainloop=ml, deterministic=True, autotune=False)
    dA, dB = cp.asarray(A), cp.asarray(B)
    dins = {k: cp.asarray(v) if hasattr(v, "shape") else v for k, v in inputs.items()}
    first = {k: cp.asnumpy(v) for k, v in kern(dA, dB, **dins).items()}
    for _ in range(3):
        again = {k: cp.asnumpy(v) for k, v in kern(dA, dB, **dins).items()}
        for k in first:
            assert np.array_equal(first[k].view(np.uint8), again[k].view(np.uint8)), k
    check(first, evt_core.interpret(tree, A, B, **inputs), 64)


def test_nan_propagates_through_amax():
    tree, A, B, inputs = make("paper", 1, 128, 256, 64, "float16", batched=False)
    inputs["C"] = inputs["C"].copy()
    inputs["C"][5, 7] = np.nan
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    got = kern(A, B, **inputs)
    assert np.isnan(got["F_colmax"][7]) and not np.isnan(np.delete(got["F_colmax"], 7)).any()


def test_torch_bf16_in_torch_out():
    torch = pytest.importorskip("torch")
    tree, A, B, inputs = make("bias_gelu", 1, 256, 256, 64, "bfloat16", batched=False)
    tA = torch.from_numpy(A.astype(np.float32)).to("cuda", torch.bfloat16)
    tB = torch.from_numpy(B.astype(np.float32)).to("cuda", torch.bfloat16)
    tb = torch.from_numpy(inputs["bias"].astype(np.float32)).to("cuda", torch.bfloat16)
    kern = evt_core.compile(tree, backend="cupy", autotune=False)
    out = kern(tA, tB, bias=tb)
    assert isinstance(out["D"], torch.Tensor) and out["D"].dtype == torch.bfloat16
    got = {"D": out["D"].float().cpu().numpy().astype(DTYPES["bfloat16"])}
    check(got, evt_core.interpret(tree, A, B, **inputs), 64)


def test_autotune_caches_choice(tmp_path, monkeypatch):
    monkeypatch.setenv("EVT_CACHE_DIR", str(tmp_path))
    tree, A, B, inputs = make("bias_gelu", 1, 512, 512, 128, "float16", batched=False)
    kern = evt_core.compile(tree, backend="cupy", autotune=True)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 128)
    assert (tmp_path / "cupy" / "autotune.json").exists()


_SM90_TILES = {"coop256": dict(bm=128, bn=256, bk=64, stages=4), "coop128": dict(bm=128, bn=128, bk=64, stages=5),
               "pp64x256": dict(bm=64, bn=256, bk=64, stages=4, pingpong=True),
               "pp128x128": dict(bm=128, bn=128, bk=64, stages=5, pingpong=True)}


@pytest.mark.parametrize("tile", sorted(_SM90_TILES))
@pytest.mark.parametrize("name,shape,det", [("paper", (1, 200, 328, 72), False), ("reduce", (1, 4100, 1032, 200), False),
                                            ("bias_gelu", (1, 4100, 1032, 136), False), ("reduce", (2, 1500, 1032, 64), True),
                                            ("paper", (3, 130, 264, 64), False), ("paper", (1, 4096, 1024, 256), False)])
def test_sm90_schedules(tile, name, shape, det):
    """Every sm90 schedule (cooperative / ping-pong, both tile shapes) on partial tiles, several
    tiles per CTA (so both ping-pong consumers and their ordering barriers run) and K blocks per
    tile, batched, deterministic. N % 8 == 0: TMA needs 16-byte rows."""
    from evt_backends.cupy.codegen.plan import TileConfig
    L, M, N, K = shape
    tree, A, B, inputs = make(name, L, M, N, K, "float16", batched=L > 1)
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", deterministic=det, autotune=False,
                            tile=TileConfig(**_SM90_TILES[tile]))
    got = kern(A, B, **inputs)
    check(got, evt_core.interpret(tree, A, B, **inputs), K)
    if det:
        again = kern(A, B, **inputs)
        for k in got:
            assert np.array_equal(np.asarray(got[k]).view(np.uint8), np.asarray(again[k]).view(np.uint8)), k
    assert not kern.run.watchdog_fired()


def test_poison_is_on():
    assert os.environ.get("EVT_POISON") == "1", "run the GPU suite with EVT_POISON=1"
