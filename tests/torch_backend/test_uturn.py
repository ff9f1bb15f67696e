"""The U-turn: a loss compiled with its model has its gradient computed in the forward GEMM's
epilogue (evt_core/torch/uturn.py), and the backward GEMMs apply the scalar tangent."""
import copy

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import evt_core.torch as et
import evt_core.torch.compiler as compiler
import evt_core.torch.ops as evt_ops
from evt_core.torch.uturn import sink_scalar_tangents


def _xmlcnn(dtype, reduction="sum", rows=16, d=32, labels=64, x_grad=False):
    torch.manual_seed(0)
    model = nn.Linear(d, labels).to(dtype)
    x = torch.randn(rows, d).to(dtype).requires_grad_(x_grad)
    t = (torch.rand(rows, labels) < 0.3).float()

    def step(m):
        return lambda x, t: F.binary_cross_entropy_with_logits(m(x).float(), t, reduction=reduction)
    return model, x, t, step


@pytest.fixture
def halves(monkeypatch):
    """The forward and backward fx graphs torch's partitioner made, after the evt plan."""
    seen = []
    real = compiler._Compilation.partition

    def partition(self, joint, joint_inputs, **kw):
        fw, bw = real(self, joint, joint_inputs, **kw)
        seen.append((fw, bw))
        return fw, bw
    monkeypatch.setattr(compiler._Compilation, "partition", partition)
    return seen


def _ops(gm):
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-5), (torch.float16, 2e-2)])
def test_bce_loss_and_its_gradient_fuse_into_the_forward_gemm(dtype, tol, halves):
    model, x, t, step = _xmlcnn(dtype)
    ref = copy.deepcopy(model)
    eager = step(ref)(x, t)
    eager.backward()
    compiled = torch.compile(step(model), backend=et.backend(kernels="numpy", strict=True), dynamic=False)
    loss = compiled(x, t)
    loss.backward()
    assert float(loss) == pytest.approx(float(eager), rel=tol)
    for p, q in zip(model.parameters(), ref.parameters()):
        assert float((p.grad.float() - q.grad.float()).norm() / q.grad.float().norm()) < tol
    (rep,) = et.reports()
    assert set(rep.placed.values()) == {"forward", "backward"} and not rep.unfused
    assert "sigmoid" in rep.pulled                       # d loss/d logits moved into the forward
    fw, bw = halves[0]
    loss_group = rep.plan.group_of("binary_cross_entropy_with_logits")
    assert rep.placed[loss_group] == "forward"           # the loss value is the forward kernel's reduction
    assert not any("sigmoid" in op for op in _ops(bw))   # nothing recomputes the logits' gradient
    assert not any("binary_cross_entropy" in op for op in _ops(fw) + _ops(bw))


def test_input_gradient_and_mean_reduction(halves):
    model, x, t, step = _xmlcnn(torch.float32, reduction="mean", x_grad=True)
    ref, xr = copy.deepcopy(model), x.detach().clone().requires_grad_(True)
    step(ref)(xr, t).backward()
    compiled = torch.compile(step(model), backend=et.backend(kernels="numpy", strict=True), dynamic=False)
    compiled(x, t).backward()
    assert float((x.grad - xr.grad).norm() / xr.grad.norm()) < 1e-5
    for p, q in zip(model.parameters(), ref.parameters()):
        assert float((p.grad - q.grad).norm() / q.grad.norm()) < 1e-5
    (rep,) = et.reports()
    assert len(rep.fused) == 3                           # the forward and both backward GEMMs


def test_the_tangent_is_a_tensor_operand_not_a_host_scalar(monkeypatch):
    """The backward GEMMs read d loss/d loss as a 0-d tensor: a by-value scalar would need a
    device-to-host read every step (and break CUDA-graph capture)."""
    model, x, t, step = _xmlcnn(torch.float32)
    keys = []
    real = evt_ops._run

    def spy(key, A, B, inputs, scalars):
        keys.append((key, [tuple(i.shape) for i in inputs], list(scalars)))
        return real(key, A, B, inputs, scalars)
    monkeypatch.setattr(evt_ops, "_run", spy)
    compiled = torch.compile(step(model), backend=et.backend(kernels="numpy", strict=True), dynamic=False)
    compiled(x, t).backward()
    assert all(not scalars for _, _, scalars in keys)
    assert any(() in shapes for _, shapes, _ in keys)


def test_sinking_keeps_the_values_of_the_joint_graph():
    """sink_scalar_tangents on a traced joint graph: same outputs, the mul by the tangent after
    the GEMM and the sum."""
    from torch.fx.experimental.proxy_tensor import make_fx

    def joint(w, x, s, g):            # the shape of a linear layer's backward under a scalar loss
        dy = (torch.sigmoid(s) - 0.5) * g
        return dy.t() @ x, dy.sum(0)

    args = (torch.randn(8, 4), torch.randn(6, 4), torch.randn(6, 8), torch.tensor(3.0))
    gm = make_fx(joint, tracing_mode="fake")(*args)
    for node in gm.graph.nodes:              # make_fx names placeholders after the arguments
        if node.op == "placeholder" and node.name.startswith("g"):
            node.target = "tangents_1"
    expected = joint(*args)
    assert sink_scalar_tangents(gm) == 1
    got = gm(*args)
    for a, b in zip(got, expected):
        torch.testing.assert_close(a, b)
    muls = [n for n in gm.graph.nodes if n.op == "call_function" and "mul" in str(n.target)]
    assert {str(m.args[0].target) for m in muls} == {"aten.mm.default", "aten.sum.dim_IntList"}


def test_mlp_with_its_loss_fuses_every_gemm_group():
    """An MLP compiled with a sum-of-squares loss: the loss's gradient (2y/64 · g) is computed in
    the second layer's forward epilogue, and no group takes another layer's bias gradient into
    its epilogue (rules.fits_frame), so all five GEMM groups fuse."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 16))
    ref, x = copy.deepcopy(model), torch.randn(64, 16)

    def step(m):
        return lambda x: m(x).square().sum() / 64
    step(ref)(x).backward()
    torch.compile(step(model), backend=et.backend(kernels="numpy", strict=True), dynamic=False)(x).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert float((p.grad - q.grad).norm() / q.grad.norm()) < 1e-5
    (rep,) = et.reports()
    assert len(rep.fused) == 5 and not rep.unfused, rep.unfused
    assert rep.pulled


def test_uturn_off_leaves_the_loss_gradient_in_the_backward():
    model, x, t, step = _xmlcnn(torch.float32)
    ref = copy.deepcopy(model)
    step(ref)(x, t).backward()
    compiled = torch.compile(step(model), backend=et.backend(kernels="numpy", strict=True, uturn=False),
                             dynamic=False)
    compiled(x, t).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        assert float((p.grad - q.grad).norm() / q.grad.norm()) < 1e-5
    (rep,) = et.reports()
    assert rep.pulled == []
