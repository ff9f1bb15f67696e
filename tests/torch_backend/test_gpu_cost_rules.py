"""The torch executor's GPU cost rules: few-tile, long-K GEMMs (weight gradients over many
rows) stay out of evt kernels, whose split-K (opt-in) is slower than cuBLAS there (refused and kept shapes, K read through
the A operand's permutation); an M-major A is copied K-contiguous before a cupy kernel unless its TMA path reads it."""
import pytest

torch = pytest.importorskip("torch")

from evt_core.torch.planning import _gemm_extents, backend_splits_k, split_k_reason  # noqa: E402


@pytest.mark.parametrize("m,n,k,batch", [
    (256, 352, 736_392, 1),      # the softmax cross-entropy U-turn's weight gradient
    (2048, 256, 16_384, 1),      # 32 tiles on 132 SMs, K = 16k
])
def test_few_tiles_over_long_k_is_refused_with_the_numbers(m, n, k, batch):
    why = split_k_reason(m, n, k, batch, sms=132)
    assert f"{m}×{n}" in why and f"K={k}" in why and "split-K" in why


@pytest.mark.parametrize("m,n,k,batch", [
    (8192, 3072, 768, 1),        # a full wave of tiles
    (256, 352, 2048, 1),         # few tiles but short K: one CTA's work is small
    (256, 256, 8192, 64),        # batched: 256 tiles in all
    (4096, 512, 2048, 1),        # 128 tiles
])
def test_full_waves_and_short_k_stay_fused(m, n, k, batch):
    assert split_k_reason(m, n, k, batch, sms=132) == ""


@pytest.mark.parametrize("kernels,options,splits", [
    ("cupy", {"split_k": "auto"}, True), ("cupy", {"split_k": 4}, True), ("cupy", {}, False),
    ("cupy", {"split_k": 1}, False), ("numba_cuda", {}, False), ("numba_cuda", {"split_k": 4}, True),
    ("auto", {"split_k": "auto"}, True), ("numpy", {"split_k": 4}, False)])
def test_the_rule_gives_way_where_the_caller_asks_for_split_k(kernels, options, splits):
    """Asked to split K (split_k, an option of both GPU backends), the backend keeps those GEMMs
    fused; by default cuBLAS runs them."""
    assert backend_splits_k(kernels, options) is splits


def test_k_is_read_through_the_permutation_of_a():
    from types import SimpleNamespace as NS
    g = NS(nodes={"x": NS(shape=(736_392, 256))})
    gg = NS(anchor=NS(shape=(256, 352)), a=("x", (1, 0)), b_view=None)       # dW = x.T @ dy
    assert _gemm_extents(g, gg) == (256, 352, 736_392, 1)
    gg = NS(anchor=NS(shape=(6, 256, 352)), a=("x3", None), b_view=None)
    g.nodes["x3"] = NS(shape=(6, 256, 64))
    assert _gemm_extents(g, gg) == (256, 352, 64, 6)
    # a column-split GEMM (lowering._column_splits): 3 batches of (M, N / 3)
    gg = NS(anchor=NS(shape=(256, 192)), a=("x3", None), b_view=(64, 3, 64))
    assert _gemm_extents(g, gg) == (256, 64, 64, 3)


def test_an_m_major_a_is_copied_k_contiguous_and_a_k_major_one_is_not():
    from evt_core.torch.ops import k_contiguous
    x = torch.randn(64, 32)
    a = x.t()                              # (32, 64) M-major: a weight gradient's activations
    got = k_contiguous(a)
    assert got.stride(-1) == 1 and torch.equal(got, a)
    assert k_contiguous(x) is x
    b = torch.randn(3, 16, 8).transpose(1, 2)      # batched, M-major
    assert k_contiguous(b).stride(-1) == 1 and torch.equal(k_contiguous(b), b)


@pytest.mark.parametrize("cc,m,option,expected", [((9, 0), 256, True, True), ((9, 0), 256, False, False),
                                                  ((8, 0), 256, True, False), ((9, 0), 250, True, False)])
def test_cupy_reads_an_m_major_a_as_it_is_only_where_tma_can(monkeypatch, cc, m, option, expected):
    """sm_90 with a_mn_major_tma (the default) and 16-byte aligned K rows: no copy; otherwise
    (the option off, another GPU, M % 8 != 0 for 16-bit data) the copy is made."""
    from evt_core.torch import ops
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: cc)
    a = torch.zeros(64, m, dtype=torch.float16).t()            # (m, 64), unit stride along M
    assert ops._tma_reads_m_major(a, {"a_mn_major_tma": option}) is expected
    assert ops._tma_reads_m_major(a, {}) is (cc == (9, 0) and m % 8 == 0)
    assert ops._tma_reads_m_major(torch.zeros(m, 64, dtype=torch.float16), {"a_mn_major_tma": option})


def test_an_operand_with_rows_off_16_bytes_is_refused_and_aligned_ones_stay_fused():
    """The language model's 30,522-word head: its logits gradient (rows of 61,044 bytes) as a
    K-major A (dX = dlogits @ W) and as an M-major A (dW = dlogits.T @ h) is refused, named;
    its forward GEMM, whose operands are aligned (only the output's rows are not), stays."""
    from types import SimpleNamespace as NS
    from evt_core.torch.planning import unaligned_operand_reason
    g = NS(nodes={"dlogits": NS(shape=(16384, 30522), dtype="float16"), "W": NS(shape=(30522, 1024), dtype="float16"),
                  "h": NS(shape=(16384, 1024), dtype="float16"), "t32": NS(shape=(64, 36), dtype="float32"),
                  "col": NS(shape=(64, 1), dtype="float16")})
    why = unaligned_operand_reason(g, NS(a=("dlogits", None), b=("W", None)))
    assert "operand A (dlogits)" in why and "30522" in why and "61044 bytes" in why and "cuBLAS" in why
    assert "operand A (dlogits)" in unaligned_operand_reason(g, NS(a=("dlogits", (1, 0)), b=("h", None)))
    assert unaligned_operand_reason(g, NS(a=("h", None), b=("W", (1, 0)))) == ""
    assert unaligned_operand_reason(g, NS(a=("h", None), b=("t32", None))) == ""      # 144-byte fp32 rows
    assert unaligned_operand_reason(g, NS(a=("h", None), b=("col", None))) == ""      # one column: no rows to align
    assert "operand B (h)" not in unaligned_operand_reason(g, NS(a=("dlogits", None), b=("h", None)))


def test_bare_gemm_is_the_accumulator_at_most_plus_a_bias():
    """planning.bare_gemm: what backend(bare_gemms="torch") leaves to cuBLAS on a GPU."""
    import numpy as np
    import evt_core
    from evt_core import ops
    from evt_core.torch.planning import bare_gemm
    acc, bias, r = np.empty((8, 8), np.float32), np.empty(8, np.float16), np.empty((8, 8), np.float16)
    out = np.empty((8, 8), np.float16)

    def program(fn, **ins):
        return evt_core.trace(fn, {"accum": acc, **ins, "D": out}).program
    assert bare_gemm(program(lambda accum: {"D": accum}))
    assert bare_gemm(program(lambda accum, bias: {"D": accum + bias}, bias=bias))
    assert not bare_gemm(program(lambda accum, bias: {"D": ops.relu(accum + bias)}, bias=bias))
    assert not bare_gemm(program(lambda accum, r: {"D": accum + r}, r=r))             # an (M, N) input
    assert not bare_gemm(program(lambda accum: {"D": 0.5 * accum}))
    two = evt_core.trace(lambda accum: {"D": accum, "E": accum}, {"accum": acc, "D": out, "E": out}).program
    assert not bare_gemm(two)
    summed = evt_core.trace(lambda accum: {"D": accum, "S": ops.sum(accum, over="M")},
                            {"accum": acc, "D": out, "S": np.empty(8, np.float32)}).program
    assert not bare_gemm(summed)


def test_bare_gemms_option_is_checked():
    from evt_core.errors import ArgumentError
    import evt_core.torch as et
    assert et.backend(bare_gemms="torch").bare_gemms == "torch"
    with pytest.raises(ArgumentError, match="bare_gemms='cublas'"):
        et.backend(bare_gemms="cublas")


def test_bare_gemms_torch_leaves_store_only_groups_to_torch_and_trains_like_eager(monkeypatch):
    """With the GPU rules in force (the SM count patched in, as for CUDA tensors), an MLP's
    weight-gradient GEMMs, which store the accumulator alone, run as torch ops under
    bare_gemms="torch", with the reason in the report; the groups with an epilogue stay fused."""
    import evt_core.torch as et
    from evt_core.torch import planning
    from .models import mlp, train_side_by_side
    monkeypatch.setattr(planning, "_gpu_sms", lambda gm, kernels: 132)
    et.clear_reports()
    x = torch.randn(12, 16, generator=torch.Generator().manual_seed(4))
    history = train_side_by_side(mlp(), x, None, lambda y, _: y.pow(2).mean(),
                                 et.backend(kernels="numpy", bare_gemms="torch"), steps=2)
    assert all(ours == pytest.approx(eager, rel=1e-5, abs=1e-6) and diff < 1e-5 for ours, eager, diff in history)
    (rep,) = et.reports()[-1:]
    bare = [k for k, why in rep.unfused.items() if "nothing to fuse" in why]
    assert bare and rep.fused, rep.unfused
