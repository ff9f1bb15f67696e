"""saving.py: with inductor for the rest, the loss ops are decomposed and the min-cut
partitioner chooses what the forward saves, so softmax cross-entropy keeps the 16-bit logits
and two row statistics instead of the fp32 log-probabilities (as torch.compile does), and the
fused groups stay whole in their halves."""
import pytest
import torch

import evt_core.torch as et
from evt_core.errors import ArgumentError


def _ce_step(partitioner):
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 24).half()
    x, t = torch.randn(64, 16).half(), torch.randint(0, 24, (64,))
    ref = torch.nn.Linear(16, 24).half()
    ref.load_state_dict(model.state_dict())

    def loss_of(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).float(), t, reduction="sum")
    be = et.backend(rest="inductor", partitioner=partitioner, strict=True)
    got = torch.compile(loss_of(model), backend=be, dynamic=False)(x, t)
    got.backward()
    want = loss_of(ref)(x, t)
    want.backward()
    assert got.item() == pytest.approx(want.item(), rel=2e-3)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.float(), q.grad.float(), rtol=2e-2, atol=2e-2)
    (rep,) = et.reports()
    return rep


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


def test_min_cut_that_would_save_inside_a_fused_group_falls_back(monkeypatch, kernel_calls):
    """A transformer block's FFN group stores gelu(z) and a view of z; min-cut would save the
    GEMM's own result z, which no kernel stores, so the graph would compute that GEMM a second
    time (a BERT-Large layer 14 % slower, bench/RESULTS-train.md run 58): the default split runs."""
    from evt_core.torch import saving
    asked = []
    check = saving._saves_inside_a_group
    monkeypatch.setattr(saving, "_saves_inside_a_group", lambda *a: asked.append(check(*a)) or asked[-1])
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
    ref = torch.nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, activation="gelu", batch_first=True)
    ref.load_state_dict(model.state_dict())
    x = torch.randn(2, 16, 64)
    be = et.backend(rest="torch", partitioner="min_cut", strict=True)
    torch.compile(lambda x: model(x).square().sum(), backend=be, dynamic=False)(x).backward()
    ref(x).square().sum().backward()
    (rep,) = et.reports()
    assert asked == [True] and rep.partitioner == "default" and rep.fused
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5)
