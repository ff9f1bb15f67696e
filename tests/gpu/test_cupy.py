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

from tests.cupy import overlap_kinds
from tests.gpu import cupy_gpu
from tests.tolerances import reassociation_atol

pytestmark = pytest.mark.gpu
cp = cupy_gpu.require()

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


epi_reduce = overlap_kinds.reductions      # a row vector and every reduction kind


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
    full = max(r.size for r in ref.values())
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
        np.testing.assert_allclose(g32, r32, rtol=rtol, atol=atol + 1e-5 * K + reassociation_atol(r, full),
                                   err_msg=name)


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
    assert list((tmp_path / "cupy" / "autotune").glob("*.json")), "the winner was not remembered"


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


# ---- the opt-in fast paths (aux_tma, tma_store_all, fast_math) on W1-W4-like epilogues ----
def epi_w1(accum, bias):
    z = accum + bias
    act = ops.gelu_tanh(z)
    return z, act


def ex_w1(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return {"bias": vals((N,), dt)}, {"z": np.empty(lmn, DTYPES[dt]), "act": np.empty(lmn, DTYPES[dt])}


def epi_w2(accum, z):
    dx = accum * ops.gelu_tanh_grad(z)
    dbias = ops.sum(dx, over="M")
    return dx, dbias


def ex_w2(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return {"z": vals(lmn, dt)}, {"dx": np.empty(lmn, DTYPES[dt]),
                                  "dbias": np.empty((L, N) if batched else (N,), np.float32)}


def epi_w3(accum):
    s = 0.125 * accum
    s_rowmax = ops.amax(s, over="N")
    return s, s_rowmax


def ex_w3(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return {}, {"s": np.empty(lmn, DTYPES[dt]), "s_rowmax": np.empty(lmn[:-1], np.float32)}


def epi_w4(accum, bias, r):
    y = accum + bias + r
    y_sum = ops.sum(y, over="N")
    y_sqsum = ops.sum(y * y, over="N")
    return y, y_sum, y_sqsum


def ex_w4(L, M, N, dt, batched):
    lmn = (L, M, N) if batched else (M, N)
    return ({"bias": vals((N,), dt), "r": vals(lmn, dt)},
            {"y": np.empty(lmn, DTYPES[dt]), "y_sum": np.empty(lmn[:-1], np.float32),
             "y_sqsum": np.empty(lmn[:-1], np.float32)})


def epi_dgelu(accum, z):
    """W2 with the erf-form derivative: BERT's GELU backward and its bias gradient."""
    dx = accum * ops.gelu_grad(z)
    dbias = ops.sum(dx, over="M")
    return dx, dbias


EPILOGUES.update({"w1": (epi_w1, ex_w1), "w2": (epi_w2, ex_w2), "w3": (epi_w3, ex_w3), "w4": (epi_w4, ex_w4),
                  "dgelu": (epi_dgelu, ex_w2)})


@pytest.mark.parametrize("fast_math", [False, True], ids=["accurate", "fast_math"])
@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("ml", ["sm80", "sm90"])
def test_erf_gelu_backward(ml, dt, fast_math):
    """gelu_grad has no fast spelling, so fast_math=True must meet the accurate tolerance too."""
    tree, A, B, inputs = make("dgelu", 1, 200, 328, 72, dt, batched=False)
    kern = evt_core.compile(tree, backend="cupy", mainloop=ml, autotune=False, fast_math=fast_math)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 72)
    assert not kern.run.watchdog_fired()


# the old opt-in paths all off, the TMA paths with accurate math, the defaults (TMA paths on,
# fast_math="auto"), and everything fast
FAST_OPTS = [{"aux_tma": False, "tma_store_all": False, "fast_math": False},
             {"aux_tma": True, "tma_store_all": True, "fast_math": False},
             {"aux_tma": True, "tma_store_all": True, "fast_math": True},
             {"aux_ring": False},       # the aux inputs in a buffer of their own, not the ring
             {}]
_OPT_ID = lambda o: ("defaults" if not o else "aux-buffer" if o.get("aux_ring") is False else  # noqa: E731
                     "+".join(k for k in ("aux_tma", "tma_store_all", "fast_math") if o.get(k)) or "all-off")


def check_fast(got, ref, K, fast):
    """fast_math=True: tanh.approx.f32 has a max relative error of ~2^-10.99 (5e-4), which
    gelu_tanh(x) = 0.5x(1 + t) turns into an absolute error up to ~2.5e-4 |x| (cancellation
    near t = -1) and gelu_tanh'(x) * accum into ~2e-3 |accum|: compared with rtol 5e-3 and
    atol 5e-3 * max|ref| per output instead of TOL."""
    if not fast:
        return check(got, ref, K)
    full = max(r.size for r in ref.values())
    for name, r in ref.items():
        g = got[name]
        g = cp.asnumpy(g) if isinstance(g, cp.ndarray) else np.asarray(g)
        if g.dtype == np.uint16:
            g = g.view(DTYPES["bfloat16"])
        g32, r32 = g.astype(np.float32), r.astype(np.float32)
        assert g.shape == r.shape and not (np.isnan(g32).any() and not np.isnan(r32).any()), name
        scale = float(np.nanmax(np.abs(r32))) if r32.size else 1.0
        rtol = max(5e-3, TOL.get(r.dtype.name, TOL["bfloat16"])[0])       # bf16 rounds coarser than that
        np.testing.assert_allclose(g32, r32, rtol=rtol, atol=5e-3 * scale + 1e-5 * K + reassociation_atol(r, full),
                                   err_msg=name)


def _fast_run(name, shape, opts, tile=None, det=False):
    from evt_backends.cupy.codegen.plan import tma_outputs
    L, M, N, K = shape
    tree, A, B, inputs = make(name, L, M, N, K, "float16", batched=L > 1)
    kw = {"tile": tile} if tile is not None else {}
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", deterministic=det, autotune=False, **opts, **kw)
    got = kern(A, B, **inputs)
    spec_fast = opts.get("fast_math", "auto")
    check_fast(got, evt_core.interpret(tree, A, B, **inputs), K, spec_fast is True or spec_fast == "auto")
    assert not kern.run.watchdog_fired()
    spec = kern.run.last.spec
    if opts.get("aux_tma", True) and name in ("w2", "w4", "paper"):
        assert spec.aux_tma, spec                     # the fast path really ran
    if opts.get("tma_store_all", True) and name in ("w1", "paper"):
        assert len(tma_outputs(spec)) == 2, spec
    assert "fast_paths" in kern.stages and "fallback" in kern.stages["fast_paths"]
    return kern, got


# (1, 4100, 2056, 136): 585 ping-pong tiles, 4-5 per CTA, so both aux buffers wrap their parity
FAST_SHAPES = [(1, 200, 328, 72), (1, 4100, 2056, 136)]


@pytest.mark.parametrize("opts", FAST_OPTS, ids=_OPT_ID)
@pytest.mark.parametrize("shape", FAST_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("name", ["w1", "w2", "w3", "w4", "paper", "reduce"])
def test_fast_paths(name, shape, opts):
    """W1-W4-like epilogues (two 16-bit outputs, M x N aux inputs, row/column reductions) on the
    default ping-pong tile, with and without the opt-in fast paths, edge tiles included."""
    _fast_run(name, shape, opts)


@pytest.mark.parametrize("opts", FAST_OPTS[1:], ids=_OPT_ID)
@pytest.mark.parametrize("name", ["w2", "w4", "paper"])
def test_fast_paths_batched(name, opts):
    _fast_run(name, (3, 130, 264, 64), opts)


@pytest.mark.parametrize("ring", [True, False], ids=["aux-ring", "aux-buffer"])
@pytest.mark.parametrize("tile", ["coop256", "coop128", "pp128x128"])
@pytest.mark.parametrize("name", ["w1", "w2", "w4"])
def test_fast_paths_other_schedules(name, tile, ring):
    from evt_backends.cupy.codegen.plan import TileConfig
    _fast_run(name, (1, 4100, 2056, 136), {**FAST_OPTS[2], "aux_ring": ring}, tile=TileConfig(**_SM90_TILES[tile]))


@pytest.mark.parametrize("tile", [dict(bm=64, bn=256, bk=64, stages=3, pingpong=True),
                                  dict(bm=128, bn=128, bk=64, stages=6, pingpong=True)], ids=["pp64x256s3", "pp128x128"])
def test_aux_ring_pingpong_repeated(tile):
    """aux in the ring, ping-pong, the paper's epilogue called 20 times against one reference:
    while the other warpgroup could start its mainloop before this tile's aux stages landed,
    2-4 of 30 such calls read an overwritten aux panel (a ring wait passing on a slot's older
    phase; scripts/aux_ring_stress.py, 2026-12-02)."""
    from evt_backends.cupy.codegen.plan import TileConfig
    tree, A, B, inputs = make("paper", 1, 4100, 2056, 136, "float16", batched=False)
    ref = evt_core.interpret(tree, A, B, **inputs)
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False, fast_math=False,
                            tile=TileConfig(**tile))
    for _ in range(20):
        check(kern(A, B, **inputs), ref, 136)
    assert kern.run.last.spec.aux_ring and kern.run.last.cfg.pingpong
    assert not kern.run.watchdog_fired()


def test_fast_paths_deterministic_bit_identical():
    tree, A, B, inputs = make("w2", 2, 1500, 1032, 64, "float16", batched=True)
    kern, first = _fast_run("w2", (2, 1500, 1032, 64), FAST_OPTS[2], det=True)
    kern2 = evt_core.compile(tree, backend="cupy", mainloop="sm90", deterministic=True, autotune=False, **FAST_OPTS[2])
    a = kern2(A, B, **inputs)
    b = kern2(A, B, **inputs)
    for k in a:
        assert np.array_equal(np.asarray(a[k]).view(np.uint8), np.asarray(b[k]).view(np.uint8)), k


def test_fast_paths_fall_back_on_column_major_aux():
    """colmajor: C is column-major (no aux TMA), D column-major (no TMA store): the old path."""
    kern, _ = _fast_run("colmajor", (1, 200, 328, 72), FAST_OPTS[2])
    assert kern.run.last.spec.aux_tma == () and kern.run.last.spec.tma_out == -1


# ---- the defaults (aux_tma, tma_store_all, fast_math="auto", tile vectors) on the ladder ----
def _ladder_case(key, L, M, N, K, dt):
    """A bench/ladder.py rung (or W1-W4) traced in dtype dt, optionally batched (every M x N
    tensor gains the L axis, vectors stay shared), with small-integer A/B."""
    from bench.ladder import LADDER
    wl = LADDER[key]
    batched = L > 1
    ex = {"accum": np.empty((L, M, N) if batched else (M, N), np.float32)}
    inputs = {}
    for name, (axes, _) in wl.aux.items():
        shape = wl.extents(axes, M, N)
        if batched and axes == "MN":
            shape = (L,) + shape
        inputs[name] = vals(shape, dt)
    for name, (axes, odt) in wl.outputs.items():
        shape = wl.extents(axes, M, N)
        if batched:
            shape = (L,) + shape
        ex[name] = np.empty(shape, DTYPES[dt] if odt == "float16" else np.float32)
    tree = evt_core.trace(wl.epilogue, {**ex, **inputs})
    A = ints((L, M, K) if batched else (M, K), dt)
    B = ints((L, K, N) if batched else (K, N), dt)
    return tree, A, B, inputs


LADDER_GPU = ["R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "W1", "W2", "W3", "W4"]
# edge tiles in M and N, a K tail, and enough tiles that every aux buffer and staging parity wraps
LADDER_SHAPES = [(1, 200, 328, 72), (1, 4100, 2056, 136), (3, 130, 264, 64)]


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", LADDER_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("key", LADDER_GPU)
def test_ladder_defaults(key, shape, dt):
    """Every ladder rung under the default options (the TMA paths on, fast_math="auto") with
    poisoned outputs, against the interpreter; the fast paths really ran, and stages says so."""
    from evt_backends.cupy.codegen.plan import tile_vectors, tma_outputs
    if dt == "bfloat16" and shape[1] > 1000:
        pytest.skip("bf16: the small shapes suffice")
    L, M, N, K = shape
    tree, A, B, inputs = _ladder_case(key, L, M, N, K, dt)
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False)
    got = kern(A, B, **inputs)
    spec = kern.run.last.spec
    check_fast(got, evt_core.interpret(tree, A, B, **inputs), K, bool(spec.fast_ops))
    assert not kern.run.watchdog_fired()
    prog = tree.program
    mn_out = tuple(k for k, o in enumerate(prog.outputs)
                   if o.dtype != "float32" and prog.spans(o)[1:] == (True, True))
    assert tma_outputs(spec) == mn_out, kern.stages["fast_paths"]
    assert len(spec.aux_tma) == sum(prog.spans(o)[1:] == (True, True) for o in prog.inputs)
    assert set(tile_vectors(prog, spec)) == {k for k, o in enumerate(prog.inputs) if o.dims == ("N",)}
    assert "fallback: none" in kern.stages["fast_paths"], kern.stages["fast_paths"]
    assert spec.direct_reds == tuple(range(len(prog.reductions)))       # dense fp32 sums / maxima


@pytest.mark.parametrize("key", ["R1", "R2", "W1", "W4"])
def test_ladder_defaults_other_tiles(key):
    """Tile vectors and staged stores on the cooperative and 128 x 128 ping-pong schedules."""
    from evt_backends.cupy.codegen.plan import TileConfig
    tree, A, B, inputs = _ladder_case(key, 1, 4100, 2056, 136, "float16")
    for tile in ("coop256", "coop128", "pp128x128"):
        kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False,
                                tile=TileConfig(**_SM90_TILES[tile]))
        got = kern(A, B, **inputs)
        check_fast(got, evt_core.interpret(tree, A, B, **inputs), 136, bool(kern.run.last.spec.fast_ops))
        assert not kern.run.watchdog_fired()


def test_column_vector_and_strided_vectors():
    """A column vector (M, 1) and a bias with a non-unit stride, staged per tile."""
    def epi(accum, scale, bias):
        D = accum * scale + bias
        return D
    M, N, K = 300, 520, 72
    scale = vals((M, 1), "float16")
    bias_full = vals((2 * N,), "float16")
    bias = bias_full[::2]
    tree = evt_core.trace(epi, {"accum": np.empty((M, N), np.float32), "scale": scale, "bias": bias,
                                "D": np.empty((M, N), np.float16)})
    A, B = ints((M, K), "float16"), ints((K, N), "float16")
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False)
    bias_d = cp.asarray(bias_full)[::2]                        # a device view with N stride 2
    assert bias_d.strides == (4,)
    got = kern(cp.asarray(A), cp.asarray(B), scale=cp.asarray(scale), bias=bias_d)
    check({k: cp.asnumpy(v) for k, v in got.items()}, evt_core.interpret(tree, A, B, scale=scale, bias=bias), K)
    staged = kern.stages["fast_paths"].split("broadcast vectors staged per tile: ")[1].split("\n")[0]
    assert sorted(staged.split(", ")) == ["bias", "scale"], kern.stages["fast_paths"]


def test_fallback_reported_for_column_major_output():
    tree, A, B, inputs = make("colmajor", 1, 200, 328, 72, "float16", batched=False)
    kern = evt_core.compile(tree, backend="cupy", mainloop="sm90", autotune=False)
    check(kern(A, B, **inputs), evt_core.interpret(tree, A, B, **inputs), 72)
    text = kern.stages["fast_paths"]
    assert "output 'D': direct stores" in text and "input 'C': per-thread loads" in text, text

