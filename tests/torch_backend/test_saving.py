"""saving.py: with inductor for the rest, the loss ops are decomposed and the min-cut
partitioner chooses what the forward saves, so softmax cross-entropy keeps the 16-bit logits
and two row statistics instead of the fp32 log-probabilities (as torch.compile does), and the
fused groups stay whole in their halves."""
import copy

import pytest
import torch

import evt_core.torch as et
from evt_core.errors import ArgumentError


def _step_like_eager(model, objective, args, backend, grad_tol):
    """One step of objective(model) compiled with `backend` against objective(a copy) eager:
    the loss within 2e-3, every gradient within grad_tol; returns the graph's report."""
    ref = copy.deepcopy(model)
    got = torch.compile(objective(model), backend=backend, dynamic=False)(*args)
    got.backward()
    want = objective(ref)(*args)
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=2e-3)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.float(), q.grad.float(), rtol=grad_tol, atol=grad_tol)
    (rep,) = et.reports()
    return rep


def _ce_step(partitioner):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 24).half()
    x, t = torch.randn(64, 16).half(), torch.randint(0, 24, (64,))

    def loss_of(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).float(), t, reduction="sum")
    be = et.backend(rest="inductor", partitioner=partitioner, strict=True)
    return _step_like_eager(model, loss_of, (x, t), be, 2e-2)


def test_min_cut_saves_the_16_bit_logits_and_row_statistics(kernel_calls):
    rep = _ce_step("auto")
    assert rep.rest == "inductor" and rep.partitioner == "min_cut"
    assert rep.fused and kernel_calls
    wide = [v for v in rep.saved.values() if v == "float32[64, 24]"]
    assert wide == [], rep.saved                        # no fp32 log-probabilities
    assert "float16[64, 24]" in rep.saved.values()      # the logits the evt kernel stored
    assert sorted(v for v in rep.saved.values() if v == "float32[64, 1]") == ["float32[64, 1]"] * 2


def test_default_partitioner_saves_the_fp32_log_probabilities(kernel_calls):
    rep = _ce_step("default")
    assert rep.partitioner == "default"
    assert "float32[64, 24]" in rep.saved.values()


def test_a_u_turn_keeps_the_default_partitioner(kernel_calls):
    """pull_into_forward places the loss gradient by the default partitioner's tag, which the
    min-cut pins cannot express, so that graph is split the default way."""
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 32).half()
    x, t = torch.randn(8, 16).half(), torch.rand(8, 32)
    f = torch.compile(lambda x, t: torch.nn.functional.binary_cross_entropy_with_logits(
        model(x).float(), t, reduction="sum"), backend=et.backend(rest="inductor", strict=True), dynamic=False)
    f(x, t).backward()
    (rep,) = et.reports()
    assert rep.pulled and rep.partitioner == "default"


def test_unknown_partitioner_is_refused_by_name():
    with pytest.raises(ArgumentError, match="partitioner='greedy'.*auto.*min_cut.*default"):
        et.backend(partitioner="greedy")


def _transformer_step(partitioner, monkeypatch):
    """One step of a transformer block; returns (report, [(GEMM ops, evt calls)] per rewritten
    half) and checks the gradients against eager."""
    from evt_core.torch import rewrite
    halves, real = [], getattr(rewrite.rewrite, "__wrapped__", rewrite.rewrite)   # (a second step: not the first's recorder)

    def recording(gm, joint):
        out = real(gm, joint)
        ops = [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]
        halves.append((sum(o.startswith(("aten.mm", "aten.addmm", "aten.bmm")) for o in ops),
                       sum("evt.run" in o for o in ops)))
        return out
    recording.__wrapped__ = real
    monkeypatch.setattr(rewrite, "rewrite", recording)
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
    ref = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 16, 64)
    be = et.backend(rest="torch", partitioner=partitioner, strict=True)
    torch.compile(lambda x: model(x).square().sum(), backend=be, dynamic=False)(x).backward()
    ref(x).square().sum().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
    (rep,) = et.reports()
    return rep, halves


def test_min_cut_saving_a_gemm_result_reads_it_off_the_kernel(monkeypatch, kernel_calls):
    """A transformer block's FFN group stores a 3-D view of the GEMM's result z and gelu(z);
    min-cut saves z itself (2-D), and the QKV group's head views. Both are views of what the
    kernels store, so min-cut's split stands and the forward computes every GEMM once, as the
    default split does (before, z was computed a second time by the graph's own addmm: a
    BERT-Large layer 14 % slower, bench/RESULTS-train.md run 58)."""
    rep, halves = _transformer_step("min_cut", monkeypatch)
    assert rep.partitioner == "min_cut" and rep.fused
    et.clear_reports()
    default, default_halves = _transformer_step("default", monkeypatch)
    assert default.partitioner == "default"
    assert halves == default_halves          # the same GEMM ops and evt calls in each half


def test_min_cut_that_would_save_inside_a_fused_group_falls_back(monkeypatch, kernel_calls):
    """A saved group value that is no view of what the kernel stores (view_of_output says
    None) would be computed a second time: the default split runs instead."""
    from evt_core.torch import rewrite, saving
    asked = []
    check = saving._saves_inside_a_group
    monkeypatch.setattr(saving, "_saves_inside_a_group", lambda *a: asked.append(check(*a)) or asked[-1])
    monkeypatch.setattr(rewrite, "view_of_output", lambda node, outputs: None)
    rep, _ = _transformer_step("min_cut", monkeypatch)
    assert asked == [True] and rep.partitioner == "default" and rep.fused


def test_view_of_output_tells_views_reshapes_and_recomputation_apart():
    """up a chain of views from a stored output: "view"; down order-keeping views to a stored
    output: "reshape"; a value only an activation of which is stored: None."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from evt_core.torch.rewrite import view_of_output

    def f(x, w):
        z = torch.mm(x, w)
        z3 = z.view(2, 4, 8)
        return z3, torch.nn.functional.gelu(z3), z3.transpose(0, 1).select(0, 1)
    gm = make_fx(f)(torch.randn(8, 6), torch.randn(6, 8))
    nodes = {str(n.target).split(".")[1] if n.op == "call_function" else n.name: n for n in gm.graph.nodes}
    mm, view, gelu, select = nodes["mm"], nodes["view"], nodes["gelu"], nodes["select"]
    assert view_of_output(mm, {view}) == "reshape"
    assert view_of_output(select, {view}) == "view"
    assert view_of_output(mm, {gelu}) is None
    assert view_of_output(view, {gelu}) is None


def test_a_language_model_step_keeps_min_cut_and_saves_16_bit_logits(kernel_calls):
    """A transformer block under a vocabulary head and a mean cross-entropy, fp16, in one graph
    (what training a language model compiles): min-cut's split stands (the FFN GEMM's result
    it saves is a view of what its kernel stores), so the forward keeps the head's fp16 logits
    and no fp32 log-probabilities. Also the decomposed loss's count of valid targets, a sum of
    bools, which ATen types int64."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu",
                                                                 batch_first=True), torch.nn.Linear(64, 96)).half()
    x, t = torch.randn(2, 16, 64).half(), torch.randint(0, 96, (2 * 16,))

    def objective(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).flatten(0, 1).float(), t)
    rep = _step_like_eager(model, objective, (x, t), et.backend(rest="inductor", strict=True), 3e-2)
    assert rep.partitioner == "min_cut" and rep.fused and kernel_calls
    # the loss backward's equal masks and zero constants, which the graph passes merge, do not
    # keep its GEMM groups out of evt kernels (planning._number_values)
    assert not [why for why in rep.unfused.values() if "after the graph passes" in why], rep.unfused
    assert "float16[32, 96]" in rep.saved.values()                        # the logits
    assert not [v for v in rep.saved.values() if v.startswith("float32[32, 96]")], rep.saved


def test_a_language_model_step_with_torch_for_the_rest_fuses_its_loss_backward(kernel_calls):
    """The same step with ATen ops for the rest (the loss ops stay whole in the fx graph and
    decompose_losses rewrites them): the log-softmax backward, NLL backward and the view
    chains back to their source's shape pass the boundary check, so no GEMM group is refused
    for them, and the step matches eager."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu",
                                                                 batch_first=True), torch.nn.Linear(64, 96))
    x, t = torch.randn(2, 16, 64), torch.randint(0, 96, (2 * 16,))

    def objective(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).flatten(0, 1), t)
    rep = _step_like_eager(model, objective, (x, t), et.backend(rest="torch", strict=True), 1e-4)
    assert rep.fused and kernel_calls
    passes = ("after the graph passes", "the graph passes removed it")
    assert not [why for why in rep.unfused.values() if any(p in why for p in passes)], rep.unfused
