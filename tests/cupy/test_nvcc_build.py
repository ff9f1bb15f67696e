"""CPU CI: the generated CUDA C++ compiles for sm_90a with nvcc, with no spills and no stack,
and the SASS holds the instructions each mainloop is about (HGMMA + TMA on sm90a, HMMA on the
sm80 path, plain FFMA for fp32). ~14 representative kernels, a few seconds each; the rest of
the matrix runs in tests/gpu/test_cupy.py."""
import pytest

from evt_backends.cupy import programs as P
from evt_backends.cupy.codegen.plan import N_GENERIC, N_UNIT, TileConfig
from evt_backends.cupy.nvcc_check import build, find_tool
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
