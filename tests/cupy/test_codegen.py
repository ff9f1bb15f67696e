"""Pure-Python checks of the CUDA generator: op coverage, literals, argument layout, per-call
layout decisions. No nvcc, no GPU."""
import re
from types import SimpleNamespace

import numpy as np
import pytest

from evt_core.tree.ops import Op

from bench import programs as P
from evt_backends.cupy.backend import CupyBackend
from evt_backends.cupy.codegen.epilogue import arg_layout
from evt_backends.cupy.codegen.plan import N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, TileConfig
from evt_backends.cupy.codegen.spelling import CUDA_SPELLING, float_literal
from evt_backends.cupy.select import candidates, decide_spec, generate, n_class, smem_bytes, SMEM_LIMIT
from evt_core.errors import UnsupportedError
from evt_core.tree.ops import ELEMENTWISE

from .helpers import canonical_spec


def test_every_elementwise_op_has_a_cuda_spelling():
    assert set(ELEMENTWISE) <= set(CUDA_SPELLING)


@pytest.mark.parametrize("v", [0.1, -2.5, 1e-30, 3.0, 65504.0])
def test_float_literal_is_the_fp32_value(v):
    lit = float_literal(v)
    assert float.fromhex(lit.strip("()").rstrip("f")) == float(np.float32(v))


def test_arg_layout_puts_8_byte_fields_first_and_pads():
    st = arg_layout(P.paper_example(), "float16").struct
    assert st.size % 8 == 0
    fmt = st.format.lstrip("<")
    assert re.fullmatch(r"[Qq]+[if]+", fmt)


@pytest.mark.parametrize("name", sorted(P.REPRESENTATIVE))
def test_source_has_one_comment_per_instruction(name):
    prog = P.REPRESENTATIVE[name]()
    dt = "float32" if "f32" in name else "float16"
    src = generate(prog, canonical_spec(prog, dt, "sm80"), candidates(prog, canonical_spec(prog, dt, "sm80"))[0])
    for i in range(len(prog.instrs)):
        assert f"// %{i} = " in src


def test_candidates_fit_shared_memory():
    for name, mk in P.REPRESENTATIVE.items():
        prog = mk()
        for ml in ("sm80", "sm90"):
            dt = "float32" if ml == "sm80" and "f32" in name else "float16"
            spec = canonical_spec(prog, dt, ml)
            for cfg in candidates(prog, spec):
                assert smem_bytes(prog, spec, cfg) <= SMEM_LIMIT


@pytest.mark.parametrize("strides,ptr,want", [((0, 0, 0), 0, N_BROADCAST), ((0, 8, 1), 256, N_UNIT_PAIR),
                                              ((0, 7, 1), 256, N_UNIT), ((0, 8, 1), 2, N_UNIT),
                                              ((0, 1, 9), 256, N_GENERIC)])
def test_n_class(strides, ptr, want):
    assert n_class(strides, ptr, "float16") == want


def _bound(M, N, K, a_strides, b_strides, dtype="float16", ptr=1 << 20):
    T = lambda st: SimpleNamespace(array=SimpleNamespace(ptr=ptr), strides=st)  # noqa: E731
    return SimpleNamespace(L=1, M=M, N=N, K=K, A=SimpleNamespace(ptr=ptr), B=SimpleNamespace(ptr=ptr),
                           a_strides=a_strides, b_strides=b_strides, dtype=dtype,
                           inputs=[T((0, 0, 1))], outputs=[T((0, N, 1))], reductions=[], scalars=[])


def test_spec_prefers_sm90_with_tma_when_aligned():
    prog = P.bias_gelu()
    spec = decide_spec(prog, _bound(256, 256, 64, (0, 64, 1), (0, 256, 1)), {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert (spec.mainloop, spec.a_load, spec.tma_out) == ("sm90", "tma", 0)


def test_spec_falls_back_to_sm80_on_unaligned_k():
    prog = P.bias_gelu()
    b = _bound(256, 256, 63, (0, 63, 1), (0, 256, 1))
    spec = decide_spec(prog, b, {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert (spec.mainloop, spec.a_load) == ("sm80", "scalar")
    with pytest.raises(UnsupportedError, match="sm90"):
        decide_spec(prog, b, {"mainloop": "sm90", "deterministic": False}, (9, 0))


def test_spec_takes_k_major_b():
    prog = P.bias_gelu()
    spec = decide_spec(prog, _bound(256, 256, 64, (0, 64, 1), (0, 1, 64)), {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert spec.b_kmajor and spec.mainloop == "sm90"


def test_m_major_a_takes_tma_only_with_its_option_and_aligned_rows():
    prog = P.bias_gelu()
    opts = {"mainloop": "auto", "deterministic": False}
    mmajor = _bound(256, 256, 64, (0, 1, 256), (0, 256, 1))          # A = X.T, X (K, M) row-major
    assert CupyBackend.options["a_mn_major_tma"] is True              # the default
    off = decide_spec(prog, mmajor, dict(opts, a_mn_major_tma=False), (9, 0))
    assert (off.mainloop, off.a_load, off.a_kmajor) == ("sm80", "scalar", True)
    on = decide_spec(prog, mmajor, dict(opts, a_mn_major_tma=True), (9, 0))
    assert (on.mainloop, on.a_load, on.a_kmajor) == ("sm90", "tma", False)
    ragged = _bound(250, 256, 64, (0, 1, 250), (0, 256, 1))           # M % 8 != 0: rows not 16-byte
    assert decide_spec(prog, ragged, dict(opts, a_mn_major_tma=True), (9, 0)).mainloop == "sm80"
    kmajor = decide_spec(prog, _bound(256, 256, 64, (0, 64, 1), (0, 256, 1)), dict(opts, a_mn_major_tma=True), (9, 0))
    assert kmajor.a_kmajor and kmajor.mainloop == "sm90"            # the option changes nothing for K-major A


def test_m_major_a_source_loads_panels_and_transposes_wgmma():
    import dataclasses
    for cfg in (TileConfig(128, 256, 64, stages=4), TileConfig(64, 256, 64, stages=4, pingpong=True)):
        prog = P.bias_gelu()
        spec = dataclasses.replace(canonical_spec(prog, "float16", "sm90"), a_kmajor=False)
        src = generate(prog, spec, cfg)
        assert "p, 1, 1, 1, 1;" in src                              # imm-trans-a = 1 (B N-major: 1)
        assert "evt_tma_load_2d(sa + p * 8192, &tmA, m0 + 64 * p, k0, fb)" in src
        assert "evt_wgmma_desc(sa + 2048 * k, 8192, 1024)" in src.replace(" + 0 + ", " + ")
        default = generate(prog, canonical_spec(prog, "float16", "sm90"), cfg)
        assert "p, 1, 1, 0, 1;" in default and "m0 + 64 * p" not in default


def test_fp32_never_takes_wgmma():
    prog = P.all_unary("float32")
    b = _bound(256, 256, 64, (0, 64, 1), (0, 256, 1), dtype="float32")
    assert decide_spec(prog, b, {"mainloop": "auto", "deterministic": False}, (9, 0)).mainloop == "sm80"


def test_plugin_module_imports_without_cupy():
    import evt_backends.cupy.plugin as plugin  # noqa: F401
    from evt_backends.cupy.backend import CupyBackend
    s = CupyBackend().available()
    assert isinstance(s.ok, bool) and (s.ok or s.reason)


# ---- the opt-in fast paths: which tensors each option takes, and the silent fallbacks ----
def _bound_io(M, N, K, inputs, outputs, L=1, ptr=1 << 20):
    """inputs/outputs: frame strides (L, M, N) per program operand, all at `ptr` (aligned)."""
    T = lambda st: SimpleNamespace(array=SimpleNamespace(ptr=ptr if st[-1] != "odd" else ptr + 2),  # noqa: E731
                                   strides=st[:3])
    return SimpleNamespace(L=L, M=M, N=N, K=K, A=SimpleNamespace(ptr=ptr), B=SimpleNamespace(ptr=ptr),
                           a_strides=(0, K, 1), b_strides=(0, N, 1), dtype="float16",
                           inputs=[T(s) for s in inputs], outputs=[T(s) for s in outputs], reductions=[], scalars=[])


_FAST = {"mainloop": "auto", "deterministic": False, "aux_tma": True, "tma_store_all": True, "fast_math": True}


def test_fast_paths_are_the_defaults():
    from evt_backends.cupy.backend import CupyBackend
    o = CupyBackend.options
    assert o["aux_tma"] is True and o["tma_store_all"] is True and o["fast_math"] == "auto"


def test_every_op_the_shared_fast_math_rule_picks_has_a_fast_spelling():
    from evt_backends.cupy.codegen.spelling import FAST_SPELLING
    from evt_backends.gpu.fastmath import APPROX_OPS, FAST_OPS
    from evt_backends.numba_cuda.codegen.spelling import FAST_SPELLING as NUMBA_FAST
    assert set(FAST_SPELLING) == APPROX_OPS == set(NUMBA_FAST) and FAST_OPS < APPROX_OPS


def test_fast_math_true_takes_every_approximation_and_log_only_then():
    """fast_math=True (opt-in, Triton's defaults) spells every APPROX_OPS instruction with MUFU,
    wherever its values go; "auto" never takes LOG (lg2.approx's error is absolute)."""
    from evt_backends.gpu.fastmath import chosen_fast_ops
    from tests.numba_cuda.trees import case
    p = case("bce_uturn", 0, 13, 11, 9)[0].program
    ops_of = lambda idx: sorted(p.instrs[i].op.value for i in idx)  # noqa: E731
    assert ops_of(chosen_fast_ops(p, True)) == ["exp", "log", "sigmoid"]
    assert chosen_fast_ops(p, "auto") == () and chosen_fast_ops(p, False) == ()   # all reach fp32 sums


def test_fast_math_auto_only_where_every_result_is_16_bit():
    from evt_backends.cupy.select import fast_ops
    w1, w2 = P.w1_forward(), P.w2_backward()
    assert all(w1.outputs[i].dtype == "float16" for i in range(2))
    # W1: gelu_tanh(z) is stored in fp16 only -> fast
    assert [w1.instrs[i].op.value for i in fast_ops(w1)] == ["gelu_tanh"]
    # W2: gelu_tanh_grad(z) feeds dbias, an fp32 column sum -> accurate
    assert fast_ops(w2) == ()
    b = _bound_io(256, 512, 64, [(0, 0, 1)], [(0, 512, 1), (0, 512, 1)])
    spec = decide_spec(w1, b, {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert spec.fast_ops == fast_ops(w1) and not spec.fast_math
    src = generate(w1, spec, candidates(w1, spec)[0])
    assert "evt_gelu_tanh_fast(" in src.split("void evt_epilogue(")[1].split("\n}\n")[0]
    off = decide_spec(w1, b, {"mainloop": "auto", "deterministic": False, "fast_math": False}, (9, 0))
    assert off.fast_ops == () and not off.fast_math
    # an fp32 output of the same op keeps the accurate spelling
    b = P.ProgramBuilder()
    t = b.op(Op.TANH, b.op(Op.ADD, b.accum, b.load("bias", "float16", ("N",))))
    b.store(t, "D", "float16")
    b.store(b.op(Op.EXP, t), "E", "float32")
    prog = b.build()
    assert [prog.instrs[i].op for i in fast_ops(prog)] == []        # tanh feeds the fp32 E too
    assert fast_ops(P.bias_gelu(gelu=Op.GELU_TANH)) != ()


def test_erf_gelu_grad_is_always_the_accurate_spelling():
    """gelu_grad (erf form) has one spelling, gpu/gelu.py's ACCURATE polynomial for Phi (within
    erff's error, tests/gpu_layer/test_gelu.py), with fast_math=True too: it has no fast
    spelling and fast_math="auto" never picks it."""
    from evt_backends.cupy.codegen.spelling import MATH_HELPERS
    from evt_backends.cupy.select import fast_ops
    helper = MATH_HELPERS.split("float evt_gelu_grad(float x)")[1].split("\n}")[0]
    assert "evt_phi_accurate(" in helper and "erff(" not in helper and "_fast" not in helper
    prog = P.bias_gelu(gelu=Op.GELU_GRAD)              # fp16 stores only: would be fast if it could
    assert fast_ops(prog) == ()
    for fast in (False, True):
        src = generate(prog, canonical_spec(prog, "float16", "sm90", fast_math=fast),
                       candidates(prog, canonical_spec(prog, "float16", "sm90"))[0])
        epi = src.split("void evt_epilogue(")[1].split("\n}\n")[0]
        assert "evt_gelu_grad(" in epi and "_fast(" not in epi
        assert "float evt_gelu_grad(float x)" in src


def test_fallbacks_are_reported():
    from evt_backends.cupy.select import fast_path_summary
    prog = P.paper_example()
    report = []
    b = _bound_io(256, 504, 64, [(0, 1, 256), (0, 0, 1)], [(0, 504, 1), (0, 1, 256)])
    spec = decide_spec(prog, b, _FAST, (9, 0), report)
    assert spec.aux_tma == () and spec.tma_extra == ()
    text = fast_path_summary(prog, spec, candidates(prog, spec)[0], report)
    assert "input 'C': per-thread loads (strides (0, 1, 256)" in text
    assert "output 'F': direct stores (strides (0, 1, 256)" in text
    assert "TMA-stored outputs: D" in text and "broadcast vectors staged per tile: bias" in text


def test_fast_options_take_every_tma_able_tensor():
    prog = P.paper_example()            # inputs C (M, N), bias (N,); outputs D, F (M, N)
    b = _bound_io(256, 512, 64, [(0, 512, 1), (0, 0, 1)], [(0, 512, 1), (0, 512, 1)])
    spec = decide_spec(prog, b, _FAST, (9, 0))
    assert (spec.tma_out, spec.tma_extra, spec.aux_tma, spec.fast_math) == (0, (1,), (0,), True)
    off = decide_spec(prog, b, {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert (off.tma_out, off.tma_extra, off.aux_tma, off.fast_math) == (0, (), (), False)


@pytest.mark.parametrize("c_strides", [(0, 1, 256), (0, 512, 2), (0, 520, 1, "odd"), (0, 500, 1)],
                         ids=["col-major", "strided-n", "misaligned-base", "pitch-not-16B"])
def test_aux_tma_falls_back_on_layouts_tma_cannot_take(c_strides):
    prog = P.paper_example()
    b = _bound_io(256, 504, 64, [c_strides, (0, 0, 1)], [(0, 504, 1), (0, 1, 256)])
    spec = decide_spec(prog, b, _FAST, (9, 0))
    assert spec.aux_tma == () and spec.tma_extra == ()      # F column-major: no second TMA store
    assert spec.mainloop == "sm90"


def test_fast_options_fall_back_on_the_sm80_path():
    prog = P.paper_example()
    b = _bound_io(256, 512, 64, [(0, 512, 1), (0, 0, 1)], [(0, 512, 1), (0, 512, 1)])
    spec = decide_spec(prog, b, dict(_FAST, mainloop="sm80"), (9, 0))
    assert (spec.mainloop, spec.tma_out, spec.tma_extra, spec.aux_tma) == ("sm80", -1, (), ())
    spec = decide_spec(prog, b, _FAST, (8, 0))
    assert (spec.mainloop, spec.aux_tma, spec.fast_math) == ("sm80", (), True)


def test_fast_option_candidates_fit_by_dropping_stages():
    for name, mk in P.WORKLOADS.items():
        prog = mk()
        spec = canonical_spec(prog, "float16", "sm90", aux_tma=True, tma_store_all=True)
        cands = candidates(prog, spec)
        assert cands[0].pingpong and (cands[0].bm, cands[0].bn) == (64, 256), name
        assert cands[0].stages >= 3
        for cfg in cands:
            assert smem_bytes(prog, spec, cfg) <= SMEM_LIMIT


def test_dense_fp32_reductions_combine_into_their_outputs():
    """Atomic mode: a dense fp32 SUM/AMAX/AMIN output is its own workspace (no evt_finish pass);
    MEAN, a strided output, fp32-less outputs and deterministic mode keep the workspace."""
    from evt_backends.cupy.codegen.epilogue import finish_kernels
    prog = P.reductions(batched=False)       # row_sum (M,), col_mean (N,), amax_all (), row_min (M,)
    M, N = 256, 512
    red = lambda st: SimpleNamespace(array=SimpleNamespace(ptr=1 << 20), strides=st)  # noqa: E731
    b = _bound_io(M, N, 64, [(0, 1, 0)], [(0, N, 1)])
    b.reductions = [red((0, 1, 0)), red((0, 0, 1)), red((0, 0, 0)), red((0, 2, 0))]
    spec = decide_spec(prog, b, {"mainloop": "auto", "deterministic": False}, (9, 0))
    assert spec.direct_reds == (0, 2)        # col_mean divides; row_min is strided
    det = decide_spec(prog, b, {"mainloop": "auto", "deterministic": True}, (9, 0))
    assert det.direct_reds == ()
    fin = finish_kernels(prog, False, spec.direct_reds).split("evt_finish")[1]
    assert "rout0" not in fin and "rout2" not in fin and "rout1" in fin and "rout3" in fin


def test_many_broadcast_vectors_never_narrow_what_compiles():
    """Forty bias rows need 40 KB of vector buffers per CTA: tiles lose stages first, and where
    nothing fits the vectors go back to per-fragment loads (reported), never an error."""
    from evt_backends.cupy.codegen.plan import tile_vectors
    for count in (4, 40, 120):
        b = P.ProgramBuilder()
        acc = b.accum
        for i in range(count):
            acc = b.op(Op.ADD, acc, b.load(f"b{i}", "float32", ("N",)))
        b.store(acc, "D", "float16")
        prog = b.build()
        report = []
        bound = _bound_io(256, 512, 64, [(0, 0, 1)] * count, [(0, 512, 1)])
        spec = decide_spec(prog, bound, {"mainloop": "auto", "deterministic": False}, (9, 0), report)
        cands = candidates(prog, spec)
        assert cands and all(smem_bytes(prog, spec, c) <= SMEM_LIMIT for c in cands)
        assert bool(tile_vectors(prog, spec)) == (count < 120), (count, report)
        assert (count < 120) or any("broadcast vectors" in r for r in report)


def test_split_k_takes_the_cooperative_schedule_and_gives_up_aux_tma():
    prog = P.w4_layernorm_stats()
    opts = {"mainloop": "auto", "deterministic": False, "aux_tma": True, "split_k": 8}
    b = _bound(256, 256, 8192, (0, 8192, 1), (0, 256, 1))
    b.inputs = [SimpleNamespace(array=SimpleNamespace(ptr=1 << 20), strides=st) for st in ((0, 0, 1), (0, 256, 1))]
    report = []
    spec = decide_spec(prog, b, opts, (9, 0), report)
    assert spec.split_k == 8 and spec.aux_tma == () and any("split_k" in r for r in report), report
    assert all(not c.pingpong for c in candidates(prog, spec))
    assert decide_spec(prog, b, dict(opts, split_k=1), (9, 0)).split_k == 1


def test_split_k_auto_fills_one_wave_of_few_tile_long_k_gemms():
    prog = P.identity()
    opts = {"mainloop": "auto", "deterministic": False, "split_k": "auto"}
    b = _bound(256, 2048, 16384, (0, 16384, 1), (0, 16384, 1))    # 32 tiles of 128 x 128
    assert decide_spec(prog, b, opts, (9, 0), sms=132).split_k == 4
    assert decide_spec(prog, _bound(4096, 2048, 16384, (0, 16384, 1), (0, 16384, 1)), opts, (9, 0),
                       sms=132).split_k == 1                          # 512 tiles: no split
    assert decide_spec(prog, b, opts, (9, 0)).split_k == 1          # no SM count (no GPU): no split


def test_split_k_source_walks_tile_split_units_and_fixes_up_per_warpgroup():
    import dataclasses
    prog = P.identity()
    base = canonical_spec(prog, "float16", "sm90")
    src = generate(prog, dataclasses.replace(base, split_k=4), TileConfig(128, 256, 64, stages=4))
    assert src.count("u < a.tiles * ns") == 2                      # producer and consumers
    # split-major units: the CTAs running together share one K range of A and B through L2
    assert src.count("const int t = u % a.tiles, sp = u / a.tiles;") == 2
    assert "atomicAdd((unsigned*)skc + t * 2 + wg, 1u)" in src and "__ldcg(part" in src
    assert "const unsigned long long skw, const unsigned long long skc" in src
    assert "(k0 > kbeg || k > 0)" in src
    plain = generate(prog, base, TileConfig(128, 256, 64, stages=4))
    assert "skw" not in plain and "kbeg" not in plain


@pytest.mark.parametrize("opts,match", [({"split_k": 0}, "split_k=0"), ({"split_k": 2.0}, "split_k=2.0"),
                                        ({"split_k": 65}, "split_k=65"), ({"a_mn_major_tma": "yes"}, "a_mn_major_tma")])
def test_opt_in_option_values_are_checked(opts, match):
    """Bad values of the opt-in paths' options are typed errors naming the option (the backend
    checks its own option values; cupy itself is not needed for that)."""
    import evt_core
    from evt_backends.cupy.backend import CupyBackend
    tree = evt_core.trace(lambda accum: {"out": accum}, {"accum": np.empty((4, 4), np.float32), "out": np.empty((4, 4), np.float16)})
    with pytest.raises(UnsupportedError, match=match):
        CupyBackend().compile(tree, opts)


def test_candidates_are_the_family_tiles_that_fit():
    """select.tiles is the whole sm90 family (what bench.group_kernels --sweep forces, the spec
    lightened where a tile needs it); candidates keeps those that fit shared memory, some with
    fewer ring stages. The paper's example, with its (M, N) inputs loaded by TMA into a buffer
    of their own (aux_ring=False) and its outputs all TMA-stored, leaves most tiles out."""
    import dataclasses

    from evt_backends.cupy.select import tiles
    p = P.paper_example()
    spec = dataclasses.replace(canonical_spec(p, "float16", "sm90", aux_tma=True, tma_store_all=True),
                               aux_ring=False)
    family = tiles(spec)
    fit = candidates(p, spec)
    shape = lambda c: (c.bm, c.bn, c.bk, c.pingpong, c.group_m)   # noqa: E731
    assert {shape(c) for c in fit} < {shape(c) for c in family}
    assert all(smem_bytes(p, spec, c) <= SMEM_LIMIT for c in fit)
    assert all(smem_bytes(p, spec, c) > SMEM_LIMIT for c in family if shape(c) not in {shape(f) for f in fit})


def test_aux_in_the_ring_costs_no_stages_of_its_own():
    """aux_ring: a tile's (M, N) inputs ride the mainloop ring as the stages after its k-blocks,
    so every tile of the family fits with at least as many stages as with a buffer of their
    own, the ring keeps a stage beside the aux stages, and the kernel loads them there."""
    import dataclasses

    from evt_backends.cupy.codegen.sm90_io import aux_stages
    from evt_backends.cupy.select import fit_stages, tiles
    p = P.paper_example()
    ring = canonical_spec(p, "float16", "sm90", aux_tma=True, tma_store_all=True)
    assert ring.aux_ring and ring.aux_tma
    buffer = dataclasses.replace(ring, aux_ring=False)
    for cfg in tiles(ring):
        got = fit_stages(p, ring, cfg)
        assert 1 <= aux_stages(ring, got) <= got.stages - 1
        try:
            assert got.stages >= fit_stages(p, buffer, cfg).stages
        except UnsupportedError:
            pass                       # the buffer does not fit this tile at all
        src = generate(p, ring, got)
        assert "aux_ring" in src and "abars + 8 * b" not in src
