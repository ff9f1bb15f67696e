"""CPU CI: the generated CUDA C++ compiles for sm_90a with nvcc, with no spills and no stack,
and the SASS holds the instructions each mainloop is about (HGMMA + TMA on sm90a, HMMA on the
sm80 path, plain FFMA for fp32). ~14 representative kernels, a few seconds each; the rest of
the matrix runs in tests/gpu/test_cupy.py."""
import pytest

from bench import programs as P
from evt_core.tree.ops import Op
from evt_backends.cupy.codegen.plan import N_GENERIC, N_UNIT, TileConfig
from bench.nvcc_check import build, find_tool
from evt_backends.cupy.select import SMEM_LIMIT, generate, smem_bytes

from .helpers import canonical_spec

pytestmark = pytest.mark.skipif(find_tool("nvcc") is None, reason="nvcc is not installed")

SM90 = TileConfig(128, 256, 64, stages=4)
SM90_128 = TileConfig(128, 128, 64, stages=5)
SM90_PP = TileConfig(64, 256, 64, stages=4, pingpong=True)
SM80 = TileConfig(128, 128, 32, 2, 4, 4)
SM80_F32 = TileConfig(128, 128, 16, 2, 4, 4)

CASES = [
    # (id, program, dtype, mainloop, cfg, spec kwargs)
    ("sm90-bias-gelu", P.bias_gelu(), "float16", "sm90", SM90, {}),
    ("sm90-identity-kmajor", P.identity(), "float16", "sm90", SM90, {"b_kmajor": True}),
    ("sm90-bf16-batched-tanh", P.REPRESENTATIVE["bias_gelu_bf16_batched"](), "bfloat16", "sm90", SM90, {}),
    ("sm90-paper-n128", P.paper_example(), "float16", "sm90", SM90_128, {}),
    ("sm90-reductions-det", P.reductions(batched=True), "float16", "sm90", TileConfig(128, 256, 64, stages=3),
     {"deterministic": True}),
    ("sm90-aux-strided", P.aux_layouts(), "float16", "sm90", SM90_128, {"classes": N_GENERIC}),
    ("sm90-pp-bias-gelu", P.bias_gelu(), "float16", "sm90", SM90_PP, {}),
    ("sm90-pp-paper-kmajor", P.paper_example(), "float16", "sm90", SM90_PP, {"b_kmajor": True}),
    ("sm90-pp-reductions-det", P.reductions(batched=True), "float16", "sm90", SM90_PP, {"deterministic": True}),
    ("sm80-bias-gelu", P.bias_gelu(), "float16", "sm80", SM80, {}),
    ("sm80-paper-kmajor", P.paper_example(), "float16", "sm80", SM80, {"b_kmajor": True}),
    ("sm80-bf16-reductions-scalar", P.REPRESENTATIVE["reductions_bf16_out"](), "bfloat16", "sm80", SM80,
     {"loads": "scalar"}),
    ("sm80-reductions-atomic", P.reductions(batched=True), "float16", "sm80", TileConfig(128, 256, 32, 2, 4, 3), {}),
    ("sm80-f32-all-ops", P.all_unary("float32"), "float32", "sm80", SM80_F32, {}),
    ("sm90-dgelu-erf", P.w2_backward(grad=Op.GELU_GRAD), "float16", "sm90", SM90_128, {}),
    ("sm80-bf16-dgelu-erf", P.w2_backward("bfloat16", grad=Op.GELU_GRAD), "bfloat16", "sm80", SM80, {}),
    ("sm80-f32-aux-unit", P.aux_layouts("float32"), "float32", "sm80", SM80_F32, {"classes": N_UNIT}),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_kernel_builds_clean(case):
    name, prog, dt, ml, cfg, kw = case
    spec = canonical_spec(prog, dt, ml, **kw)
    assert smem_bytes(prog, spec, cfg) <= SMEM_LIMIT
    rep = build(generate(prog, spec, cfg))
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    assert not [w for w in rep.warnings if "C7512" in w or "C7508" in w], rep.warnings
    if not rep.sass:
        pytest.skip("cuobjdump not found: resource checks only")
    assert rep.sass["LDL"] == rep.sass["STL"] == 0
    if ml == "sm90":
        assert rep.sass["HGMMA"] > 0 and rep.sass["UTMALDG"] > 0, rep.sass
        assert rep.sass["MEMBAR.ALL.GPU"] == 0
        if spec.tma_out >= 0:
            assert rep.sass["UTMASTG"] > 0
    elif dt == "float32":
        assert rep.sass["HMMA"] == 0 and rep.sass["FFMA"] > 0
    else:
        assert rep.sass["HMMA"] > 0, rep.sass


# ---- the opt-in fast paths: aux_tma, tma_store_all, fast_math (GPU-validated in tests/gpu) ----
FAST = {"aux_tma": True, "tma_store_all": True, "fast_math": True}
SM90_COOP128 = TileConfig(128, 128, 64, stages=5)
FAST_CASES = [
    # (id, program, dtype, cfg or None (= the first candidate, what autotune=False takes), spec kwargs)
    ("W1-pp", P.w1_forward(), "float16", None, FAST),
    ("W2-pp", P.w2_backward(), "float16", None, FAST),
    ("W3-pp", P.w3_softmax_stats(), "float16", None, FAST),
    ("W4-pp", P.w4_layernorm_stats(), "float16", None, FAST),
    ("W1-coop256", P.w1_forward(), "float16", SM90, FAST),
    ("W2-coop128", P.w2_backward(), "float16", SM90_COOP128, FAST),
    ("W4-pp128-bf16", P.w4_layernorm_stats("bfloat16"), "bfloat16", TileConfig(128, 128, 64, stages=6, pingpong=True),
     FAST),
    ("W2-batched-det", P.w2_backward(batched=True), "float16", None, dict(FAST, deterministic=True)),
    ("W4-batched-coop", P.w4_layernorm_stats(batched=True), "float16", SM90, FAST),
    ("paper-batched-pp", P.paper_example(batched=True), "float16", None, FAST),
    ("paper-kmajor-coop128", P.paper_example(), "float16", SM90_COOP128, dict(FAST, b_kmajor=True)),
    ("aux-colmajor-fallback", P.aux_layouts(), "float16", None, dict(FAST, classes=N_GENERIC)),
]


@pytest.mark.parametrize("case", FAST_CASES, ids=[c[0] for c in FAST_CASES])
def test_fast_paths_build_clean(case):
    from evt_backends.cupy.codegen.plan import tma_outputs
    from evt_backends.cupy.select import candidates, fit_stages
    name, prog, dt, cfg, kw = case
    spec = canonical_spec(prog, dt, "sm90", **kw)
    cfg = candidates(prog, spec)[0] if cfg is None else fit_stages(prog, spec, cfg)
    assert smem_bytes(prog, spec, cfg) <= SMEM_LIMIT
    src = generate(prog, spec, cfg)
    n_aux = sum(1 for o in prog.inputs if "M" in o.dims and "N" in o.dims)
    if "fallback" in name:
        assert spec.aux_tma == () and "tmX0" not in src
    else:
        assert len(spec.aux_tma) == n_aux and ("tmX0" in src) == (n_aux > 0)
    outs = tma_outputs(spec)
    rep = build(src)
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    assert not [w for w in rep.warnings if "C7512" in w or "C7508" in w], rep.warnings
    if not rep.sass:
        pytest.skip("cuobjdump not found: resource checks only")
    assert rep.sass["LDL"] == rep.sass["STL"] == 0
    assert rep.sass["HGMMA"] > 0 and rep.sass["MEMBAR.ALL.GPU"] == 0, rep.sass
    assert rep.sass["UTMALDG"] >= 2 + len(spec.aux_tma), rep.sass
    # every TMA-stored output has its own store per 64 x 64 panel of the tile
    sites = (cfg.bn // 64) * (cfg.bm // 64) if cfg.pingpong else 2 * (cfg.bn // 128)
    assert len(outs) >= 1 and rep.sass["UTMASTG"] >= len(outs) * sites, (outs, rep.sass)
    if any(ins.op.value in ("gelu_tanh", "gelu_tanh_grad", "tanh") for ins in prog.instrs):
        assert rep.sass["MUFU.TANH"] > 0, rep.sass


def test_fast_paths_default_off_and_same_source():
    """With the options off (the defaults) the generated source is exactly the old one."""
    prog = P.w1_forward()
    spec = canonical_spec(prog, "float16", "sm90")
    assert spec.tma_extra == () and spec.aux_tma == () and not spec.fast_math
    src = generate(prog, spec, SM90_PP)
    epi = src.split("void evt_epilogue(")[1].split("\n}\n")[0]
    assert "tmD1" not in src and "tmX0" not in src and "abars + 8 * ab" not in src
    assert "evt_gelu_tanh(" in epi and "_fast(" not in epi
    fast = generate(prog, canonical_spec(prog, "float16", "sm90", fast_math=True), SM90_PP)
    assert "evt_gelu_tanh_fast(" in fast.split("void evt_epilogue(")[1].split("\n}\n")[0]


# ---- the defaults on the epilogue ladder (bench/ladder.py): node costs are their bytes ----
LADDER_KEYS = ["R0", "R1", "R2", "R3", "R4", "R5", "R6", "R7", "W1", "W2", "W4"]


@pytest.mark.parametrize("key", LADDER_KEYS)
def test_ladder_defaults_sass(key):
    """The default call (aux_tma, tma_store_all, fast_math="auto" on; row-major aligned operands)
    of each ladder rung on its first candidate tile: every 16-bit M x N output staged with STS
    and written by one UTMASTG per 64 x 64 panel, M x N inputs by UTMALDG, broadcast vectors one
    LDG per thread and tile (no per-fragment global loads), no generic ST/LD into shared memory,
    no spills, shared memory within 227 KB."""
    import evt_core
    from bench.ladder import LADDER
    from evt_backends.cupy.codegen.plan import tile_vectors, tma_outputs
    from evt_backends.cupy.select import candidates

    from .helpers import default_spec
    wl = LADDER[key]
    prog = evt_core.trace(wl.epilogue, wl.example(256, 512)).program
    spec = default_spec(prog)
    cfg = candidates(prog, spec)[0]
    assert smem_bytes(prog, spec, cfg) <= SMEM_LIMIT
    mn_out = [k for k, o in enumerate(prog.outputs) if o.dtype != "float32" and prog.spans(o)[1:] == (True, True)]
    mn_in = [k for k, o in enumerate(prog.inputs) if prog.spans(o)[1:] == (True, True)]
    assert tma_outputs(spec) == tuple(mn_out) and spec.aux_tma == tuple(mn_in), spec
    rep = build(generate(prog, spec, cfg))
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    if not rep.sass:
        pytest.skip("cuobjdump not found: resource checks only")
    s = rep.sass
    assert s["ST.E"] == 0 and s["LD.E"] == 0, s                   # shared memory through STS/LDS only
    assert s["STG"] == 0, s                                       # no per-thread global stores left
    sites = (cfg.bn // 64) * (cfg.bm // 64) if cfg.pingpong else 2 * (cfg.bn // 128)
    assert s["UTMASTG"] >= len(mn_out) * sites, s
    assert s["UTMALDG"] >= 2 + len(mn_in), s
    # STS: one word per column pair and fragment row slot, per staged output
    assert s["STS"] >= len(mn_out) * cfg.bn // 4 * (cfg.bm // 64 if cfg.pingpong else 1), s
    # global loads: the watchdog's flag reads plus one or two per thread and broadcast vector
    nvec = len(tile_vectors(prog, spec))
    assert s["LDG"] <= 4 + 2 * nvec * (cfg.bn // 128), s
    if any(prog.instrs[i].op.value in ("gelu_tanh", "tanh") for i in spec.fast_ops):
        assert s["MUFU.TANH"] > 0, s
    # reductions: row totals 2 xor shuffles per row slot; column totals a halving butterfly,
    # 7/4 shuffles per column pair and warp (the per-pair reduction took 6)
    from evt_backends.cupy.codegen.plan import COL, ROW, reduction_kind
    kinds = [reduction_kind(r) for r in prog.reductions]
    mh = cfg.bm // 64 if cfg.pingpong else 1
    assert s["SHFL"] <= mh * (kinds.count(ROW) * 4 + kinds.count(COL) * 7 * (cfg.bn // 8) // 4), s


@pytest.mark.parametrize("cfg", [SM90, SM90_PP], ids=["coop", "pingpong"])
def test_m_major_a_kernel_builds_clean(cfg):
    """The opt-in M-major A path (a_mn_major_tma): TMA panels and a transposed wgmma still
    build to HGMMA + UTMALDG with no spills or stack."""
    import dataclasses
    prog = P.bias_gelu()
    spec = dataclasses.replace(canonical_spec(prog, "float16", "sm90"), a_kmajor=False)
    rep = build(generate(prog, spec, cfg))
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    if rep.sass:
        assert rep.sass["HGMMA"] > 0 and rep.sass["UTMALDG"] > 0 and rep.sass["LDL"] == rep.sass["STL"] == 0


@pytest.mark.parametrize("prog", [P.identity(), P.reductions(batched=True)], ids=["identity", "reductions"])
def test_split_k_kernel_builds_clean(prog):
    """The opt-in split-K kernel (split_k): HGMMA + TMA, no spills or stack, and the
    fix-up's atomic."""
    import dataclasses
    spec = dataclasses.replace(canonical_spec(prog, "float16", "sm90"), split_k=8)
    rep = build(generate(prog, spec, SM90))
    assert (rep.stack, rep.spill_stores, rep.spill_loads) == (0, 0, 0), rep
    if rep.sass:
        assert rep.sass["HGMMA"] > 0 and rep.sass["UTMALDG"] > 0 and rep.sass["LDL"] == rep.sass["STL"] == 0
