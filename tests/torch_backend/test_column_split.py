"""The fused QKV projection (one Linear with 3 * hidden outputs whose result the graph splits
into Q, K and V with select) runs as one evt kernel: a GEMM batched over the three column
blocks stores them stacked, and the selects and head-split views after it stay torch's own
views of that result (partition/lowering._column_splits and _peelable). Training matches
eager."""
import pytest
import torch

import evt_core.torch as et

from .models import train_side_by_side


def _grads_close(history, tol=1e-5):
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=1e-5, abs=1e-6)
        assert grad_diff < tol


class _QKV(torch.nn.Module):
    """x (S, D) -> Linear(D, 3D) -> (S, 3, D) -> (3, S, D) contiguous -> q, k, v -> (q k^T) v,
    the split nn.MultiheadAttention makes of its in-projection."""

    def __init__(self, d):
        super().__init__()
        self.proj = torch.nn.Linear(d, 3 * d)

    def forward(self, x):
        s, d = x.shape
        y = self.proj(x).unflatten(-1, (3, d)).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
        q, k, v = y[0], y[1], y[2]
        return (q @ k.t()) @ v


def _select_group(rep):
    g = rep.plan.graph
    (k,) = [k for k, grp in enumerate(rep.plan.groups) if any(g.nodes[n].op == "select" for n in grp)]
    assert any(g.nodes[n].op in ("mm", "addmm") for n in rep.plan.groups[k])
    return k


def test_qkv_projection_fuses_and_trains_like_eager():
    torch.manual_seed(0)
    x, r = torch.randn(12, 8), torch.randn(12, 8)
    history = train_side_by_side(_QKV(8), x, None, lambda y, _: (y * r).sum(), et.backend(kernels="numpy"),
                                 steps=2, lr=1e-3)
    _grads_close(history)
    (rep,) = et.reports()
    k = _select_group(rep)
    assert k in rep.fused and k not in rep.unfused, rep.unfused


def test_smoke_bert_fuses_its_qkv_projection():
    """The smoke BERT encoder layer of bench/train_workloads.py: its in-projection group (the
    one with the selects) is fused, and so is the head split of the attention output's
    gradient (its views peeled); only the out-projection's row split is left (rebatch=True
    fuses it). A random projection as the loss keeps the gradients O(1)."""
    from bench.train_workloads import WORKLOADS
    torch.manual_seed(0)
    model, (x,), _ = WORKLOADS["bert"].build(True)
    r = torch.randn(x.shape)
    history = train_side_by_side(model, x, None, lambda y, _: (y * r).sum(), et.backend(kernels="numpy"), steps=2)
    _grads_close(history, 1e-4)
    (rep,) = et.reports()
    k = _select_group(rep)
    assert k in rep.fused, rep.unfused
    assert len(rep.fused) == 10 and len(rep.unfused) == 1, rep.unfused


class _RowOfRelu(torch.nn.Module):
    """relu(x @ w^T + b) transposed, row 1 of it: the transpose before (`early`) or after the
    relu. torch's relu of a transposed value keeps its strides, (1, 6) here."""

    def __init__(self, early):
        super().__init__()
        self.lin, self.early = torch.nn.Linear(8, 6), early

    def forward(self, x):
        return torch.relu(self.lin(x).t())[1] if self.early else torch.relu(self.lin(x)).t()[1]


@pytest.mark.parametrize("early", [False, True])
def test_peeled_views_read_only_results_with_torchs_strides(early):
    """The kernel stores relu row-major and leaves the t and the select to the fx graph: fused
    when torch's relu is row-major as well, refused (with the strides in the reason) when it is
    not, since the fx graph's views then would not see torch's strides."""
    torch.manual_seed(0)
    model, x = _RowOfRelu(early), torch.randn(5, 8)
    with torch.no_grad():
        got = torch.compile(model, backend=et.backend(kernels="numpy"), dynamic=False)(x)
        torch.testing.assert_close(got, model(x), rtol=1e-6, atol=1e-6)   # NumPy's GEMM rounds its own way
    (rep,) = et.reports()
    if early:
        assert not rep.fused and "strides" in rep.unfused[0], rep.unfused
    else:
        assert rep.fused == [0] and not rep.unfused
