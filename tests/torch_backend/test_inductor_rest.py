"""backend(rest="inductor"): inductor compiles the ops outside evt kernels and calls the evt
kernels as extern ops. On the CPU inductor emits C++ (slow to build, so one model here)."""
import pytest
import torch

import evt_core.torch as et
from evt_core.errors import ArgumentError

from .models import train_side_by_side, transformer_block


def test_transformer_block_trains_like_eager_with_inductor_around_evt(kernel_calls):
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1))
    be = et.backend(rest="inductor", strict=True)
    history = train_side_by_side(transformer_block(), x, None, lambda y, _: y.pow(2).mean(), be, steps=3)
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=1e-5, abs=1e-6)
        assert grad_diff < 1e-5
    assert history[-1][0] < history[0][0]
    (rep,) = et.reports()
    assert rep.rest == "inductor"
    assert rep.fused and set(rep.fused).isdisjoint(rep.unfused)
    # the evt kernels ran from inductor's code, forward and backward, every step
    placed = {rep.placed[k] for k in rep.fused}
    assert placed == {"forward", "backward"}
    assert len(kernel_calls) == 3 * len(rep.fused)


def test_decomposed_half_keeps_the_evt_op_as_one_node():
    """The retrace under inductor's decompositions breaks ATen ops up but never the evt op."""
    from torch.fx.experimental.proxy_tensor import make_fx

    from evt_core.torch.inductor import decomposed
    import evt_core
    from evt_core import ops
    import numpy as np
    tree = evt_core.trace(lambda accum, bias: {"D": ops.relu(accum + bias)},
                          {"accum": np.empty((8, 16), np.float32), "bias": np.empty(16, np.float32),
                           "D": np.empty((8, 16), np.float32)})
    f = et.kernel_op(tree)

    def g(a, b, bias):
        return torch.nn.functional.layer_norm(f(a, b, bias=bias)["D"], (16,))
    args = [torch.randn(8, 4), torch.randn(4, 16), torch.randn(16)]
    gm = make_fx(g)(*args)
    assert any(n.target is torch.ops.aten.native_layer_norm.default for n in gm.graph.nodes)
    out = decomposed(gm, args)
    targets = [n.target for n in out.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.evt.run.default) == 1
    assert torch.ops.aten.native_layer_norm.default not in targets
    torch.testing.assert_close(out(*args), gm(*args))


def test_auto_runs_torch_ops_on_the_cpu(kernel_calls):
    x = torch.randn(4, 16)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    out = torch.compile(model, backend=et.backend(strict=True), dynamic=False)(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    (rep,) = et.reports()
    assert rep.rest == "torch" and kernel_calls


def test_unknown_rest_is_refused_by_name():
    with pytest.raises(ArgumentError, match="rest='triton'.*auto.*inductor.*torch"):
        et.backend(rest="triton")


def test_inductor_failure_runs_the_half_as_torch_ops(monkeypatch, kernel_calls):
    import evt_core.torch.inductor as ind

    def broken(gm, inputs):
        raise RuntimeError("lowering exploded")
    monkeypatch.setattr(ind, "decomposed", broken)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    with pytest.warns(UserWarning, match="inductor failed on the inference graph.*lowering exploded"):
        with torch.no_grad():
            out = torch.compile(model, backend=et.backend(rest="inductor"), dynamic=False)(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    (rep,) = et.reports()
    assert rep.rest.startswith("torch (inductor failed") and kernel_calls


def test_cudagraphs_with_inductor_falls_back_on_cpu(kernel_calls):
    """cudagraphs=True goes to inductor's own CUDA-graph trees, which skip CPU graphs."""
    from .models import mlp
    be = et.backend(rest="inductor", cudagraphs=True, strict=True)
    history = train_side_by_side(mlp(), torch.randn(6, 16), None, lambda y, _: y.square().mean(), be, steps=2)
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=1e-5, abs=1e-6) and grad_diff < 1e-5
    (rep,) = et.reports()
    assert rep.rest == "inductor" and kernel_calls


def test_unavailable_inductor_runs_torch_ops_and_says_why(monkeypatch, kernel_calls):
    import evt_core.torch.inductor as ind
    monkeypatch.setattr(ind, "available", lambda devices: "triton is not installed")
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))
    x = torch.randn(4, 16)
    out = torch.compile(model, backend=et.backend(rest="inductor"), dynamic=False)(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    (rep,) = et.reports()
    assert rep.rest == "torch (triton is not installed)" and kernel_calls
    torch._dynamo.reset()
    with pytest.raises(Exception, match="rest='inductor'.*triton is not installed"):
        torch.compile(model, backend=et.backend(rest="inductor", strict=True), dynamic=False)(x)


def test_inductor_rest_keeps_the_logits_16_bit_under_a_widening_cast(kernel_calls):
    """Cross-entropy on logits.float(): with inductor for the rest, the cast leaves the GEMM
    group (partition.refine.narrow_stores), so the kernel stores fp16 logits and inductor folds
    the cast into the loss; with ATen ops for the rest the kernel stores fp32 (one kernel
    fewer). Both train like eager."""
    import evt_core.torch.ops as evt_ops
    torch.manual_seed(0)
    model = torch.nn.Linear(16, 24).half()
    x, t = torch.randn(64, 16).half(), torch.randint(0, 24, (64,))

    def loss_of(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).float(), t, reduction="sum")
    want = loss_of(model)(x, t)
    stored = {}
    for rest in ("inductor", "torch"):
        start = len(kernel_calls)
        got = torch.compile(loss_of(model), backend=et.backend(rest=rest, strict=True), dynamic=False)(x, t)
        assert got.item() == pytest.approx(want.item(), rel=2e-3)
        # the kernels this step ran (not the registry's new keys: registration is by content,
        # so an earlier test's identical kernel would not be new)
        ran = [evt_ops.entry(k) for k in kernel_calls[start:]]
        stored[rest] = {o.dtype for e in ran for o in e.tree.program.outputs}
        torch._dynamo.reset()
    assert stored == {"inductor": {"float16"}, "torch": {"float32"}}
