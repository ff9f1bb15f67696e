"""torch.compile(..., backend="evt"): training matches eager; reports describe the plan."""
import importlib.util
import shutil
import tomllib
import warnings
from importlib import import_module
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import evt_core.torch as et
import evt_core.torch.ops as evt_ops
from evt_core.errors import UnsupportedError
from evt_core.partition import PartitionError, plan_cost

from .models import gelu_mlp, mlp, train_side_by_side, transformer_block


def _assert_tight(history):
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=1e-5, abs=1e-6)
        assert grad_diff < 1e-5


def test_transformer_block_trains_like_eager(kernel_calls):
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1))
    history = train_side_by_side(transformer_block(), x, None, lambda y, _: y.pow(2).mean(), "evt", steps=3)
    _assert_tight(history)
    assert history[-1][0] < history[0][0]              # it trained
    (rep,) = et.reports()
    assert rep.fused and kernel_calls                  # GEMM groups ran as evt kernels
    assert set(rep.fused).isdisjoint(rep.unfused)


def test_erf_gelu_backward_group_is_fused(kernel_calls):
    """The dgelu group (dh = dy @ W2, gelu_backward(dh, z) in the erf form, the bias gradient)
    runs as one evt kernel, and training still matches eager."""
    x = torch.randn(12, 16, generator=torch.Generator().manual_seed(3))
    _assert_tight(train_side_by_side(gelu_mlp(), x, None, lambda y, _: y.pow(2).mean(), "evt", steps=2))
    (rep,) = et.reports()
    g = rep.plan.graph
    (dgelu,) = [k for k, grp in enumerate(rep.plan.groups) if any(g.nodes[n].op == "gelu_backward" for n in grp)]
    assert any(g.nodes[n].op == "mm" for n in rep.plan.groups[dgelu])
    assert dgelu in rep.fused and dgelu not in rep.unfused, rep.unfused


def test_mlp_cross_entropy_with_options(kernel_calls):
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(12, 16, generator=g), torch.randint(0, 8, (12,), generator=g)
    be = et.backend(kernels="numpy", strict=True, time_limit=10)
    _assert_tight(train_side_by_side(mlp(), x, y, F.cross_entropy, be, steps=2))
    (rep,) = et.reports()
    gemm_groups = set(rep.fused) | set(rep.unfused)
    assert len(rep.fused) >= 3 and len(gemm_groups) >= 4
    assert len(kernel_calls) == 2 * len(rep.fused)


def test_report_fields_and_drawing():
    x = torch.randn(4, 16)
    torch.compile(mlp(), backend="evt")(x).sum().backward()
    (rep,) = et.reports()
    g = rep.plan.graph
    assert rep.bytes_saved == plan_cost(g, [[n] for n in g.compute_nodes()]) - rep.plan.cost > 0
    assert all(isinstance(k, int) and isinstance(v, str) for k, v in rep.unfused.items())
    dot = rep.to_dot()
    assert dot.startswith("digraph") and dot.count("subgraph cluster_") == len(rep.plan.groups)
    assert "evt kernel, forward" in dot and "evt kernel, backward" in dot
    assert set(rep.placed) == set(rep.fused) and set(rep.placed.values()) == {"forward", "backward"}
    if shutil.which("dot"):
        assert "<svg" in rep.to_svg()
    elif importlib.util.find_spec("graphviz") is None:
        with pytest.raises(UnsupportedError, match="graphviz"):
            rep.to_svg()


def test_inference_graph_is_planned_too(kernel_calls):
    model, x = mlp(), torch.randn(4, 16)
    with torch.no_grad():
        out = torch.compile(model, backend="evt")(x)
        torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    (rep,) = et.reports()
    assert rep.fused and kernel_calls and not rep.unfused


def test_planning_failure_runs_unfused_with_a_warning(monkeypatch):
    import evt_core.torch.planning as planning

    def broken(*a, **k):
        raise PartitionError("unknown-op", "no rule for this op", ("mm",))
    monkeypatch.setattr(planning, "plan_graph", broken)
    model, x = mlp(), torch.randn(4, 16)
    with pytest.warns(UserWarning, match="runs unfused"):
        out = torch.compile(model, backend="evt")(x)
    torch.testing.assert_close(out, model(x))
    (rep,) = et.reports()
    assert rep.plan is None and "no rule" in rep.error and rep.bytes_saved == 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert rep.to_dot().startswith("digraph")
    torch._dynamo.reset()
    with pytest.raises(Exception, match="no rule"):
        torch.compile(model, backend=et.backend(strict=True))(x)


def test_entry_point_names_the_default_backend():
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    target = pyproject["project"]["entry-points"]["torch_dynamo_backends"]["evt"]
    module, name = target.split(":")
    assert getattr(import_module(module), name) is et.dynamo_backend


def test_cudagraphs_option_falls_back_on_cpu(kernel_calls):
    """CPU graphs cannot be captured: torch's skip rules leave them as plain graphs."""
    x = torch.randn(6, 16)
    be = et.backend(cudagraphs=True, strict=True)
    _assert_tight(train_side_by_side(mlp(), x, None, lambda y, _: y.square().mean(), be, steps=2))
    assert kernel_calls


def test_a_failing_rewrite_runs_torchs_graph(monkeypatch):
    import evt_core.torch.rewrite as rw

    def broken(graph):
        raise RuntimeError("sort exploded")
    monkeypatch.setattr(rw, "_topo_sort", broken)
    model, x = mlp(), torch.randn(4, 16)
    with pytest.warns(UserWarning, match="a bug in evt.*sort exploded"):
        out = torch.compile(model, backend="evt")(x)
    torch.testing.assert_close(out, model(x))
    (rep,) = et.reports()
    assert not rep.fused and "sort exploded" in rep.error


def test_cpu_tensors_run_numpy_whatever_the_gpu_choice(kernel_calls):
    model, x = mlp(), torch.randn(4, 16)
    out = torch.compile(model, backend=et.backend(kernels="cupy", strict=True))(x)
    torch.testing.assert_close(out, model(x), rtol=1e-5, atol=1e-6)
    assert kernel_calls and all(set(evt_ops.entry(k).compiled) == {"numpy"} for k in kernel_calls)


def test_bfloat16_training_fuses_and_matches_eager(kernel_calls):
    """A bfloat16 model's groups are traced in bfloat16 (not float32), so their kernels take
    the step's tensors, and the step matches eager's within bfloat16's rounding."""
    x = torch.randn(12, 16, generator=torch.Generator().manual_seed(4)).to(torch.bfloat16)
    history = train_side_by_side(gelu_mlp().to(torch.bfloat16), x, None,
                                 lambda y, _: y.float().pow(2).sum(), "evt", steps=2)
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=2e-2) and grad_diff < 0.25
    (rep,) = et.reports()
    assert rep.fused and not rep.unfused, rep.unfused
    assert kernel_calls


def test_float16_transformer_on_the_cpu_trains_like_eager(kernel_calls):
    """ATen on the CPU keeps a 16-bit layer norm's mean and rstd in 16 bits (CUDA: fp32); the
    importer keeps such a layer norm opaque instead of refusing the graph (strict planning)."""
    x = torch.randn(2, 8, 32, generator=torch.Generator().manual_seed(1)).to(torch.float16)
    be = et.backend(kernels="numpy", strict=True)
    history = train_side_by_side(transformer_block().to(torch.float16), x, None,
                                 lambda y, _: y.float().pow(2).mean(), be, steps=2, lr=0.01)
    for ours, eager, grad_diff in history:
        assert ours == pytest.approx(eager, rel=1e-2) and grad_diff < 2e-2
    (rep,) = et.reports()
    assert rep.fused and kernel_calls
    g = rep.plan.graph
    assert any(n.op == "native_layer_norm.16_bit_stats" for n in g.nodes.values())


def test_a_tree_the_backend_refuses_runs_as_torch_ops(monkeypatch, kernel_calls):
    """Kernels are compiled when the graph is planned: a backend that refuses a group's tree
    makes that group run as torch ops, with the backend's reason in the report, and the step
    still matches eager (it does not fail at the first training step)."""
    real = evt_ops.Entry.kernel

    def refuse_gelu_grad(self, device_type):
        if "gelu_grad" in self.tree.program.describe():
            raise UnsupportedError("this backend has no gelu_grad")
        return real(self, device_type)
    monkeypatch.setattr(evt_ops.Entry, "kernel", refuse_gelu_grad)
    x = torch.randn(12, 16, generator=torch.Generator().manual_seed(5))
    _assert_tight(train_side_by_side(gelu_mlp(), x, None, lambda y, _: y.pow(2).mean(), "evt", steps=2))
    (rep,) = et.reports()
    assert any("no gelu_grad" in why for why in rep.unfused.values()), rep.unfused
    assert rep.fused and kernel_calls


class _HeadSplit(torch.nn.Module):
    """x: (S, B, D) -> out-projection -> (B, S, D) + residual: the result's rows are the GEMM's
    rows split (S, B) and swapped, a layout no output strides of the (S*B, D) frame express."""

    def __init__(self, r):
        super().__init__()
        self.proj = torch.nn.Linear(r.shape[-1], r.shape[-1])
        self.register_buffer("r", r)

    def forward(self, x):
        s, b, d = x.shape
        return self.proj(x.reshape(s * b, d)).view(s, b, d).transpose(0, 1) + self.r


@pytest.mark.parametrize("rebatch", [False, True])
def test_rebatch_fuses_a_row_split_gemm(kernel_calls, rebatch):
    """With rebatch=True that GEMM runs batched over B with strided A rows (lowering._rebatch),
    so its group fuses; training matches eager either way."""
    g = torch.Generator().manual_seed(5)
    x, r = torch.randn(6, 3, 16, generator=g), torch.randn(3, 6, 16, generator=g)
    be = et.backend(kernels="numpy", rebatch=rebatch)
    history = train_side_by_side(_HeadSplit(r), x, None, lambda y, _: (y * y).sum(), be, steps=2)
    _assert_tight(history)
    rep = et.reports()[0]
    g_ = rep.plan.graph
    (fwd,) = [k for k, grp in enumerate(rep.plan.groups) if any(g_.nodes[n].op == "addmm" for n in grp)]
    assert (fwd in rep.fused) == rebatch, rep.unfused


def test_a_mask_read_by_a_later_group_keeps_its_group_unfused_and_named():
    """masked_fill saves its boolean mask for the backward: the forward group that computes it
    cannot store a bool, so it runs as torch ops with the reason in the report (it raised a
    bare KeyError from the lowering once), and the other groups still fuse."""
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 12)

    def fn(m, x):
        y = m(x)
        return y.masked_fill(y < 0, -1.0)
    x = torch.randn(15, 8)
    history = train_side_by_side(_Wrap(model, fn), x, None, lambda y, _: (y * y).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=2)
    _assert_tight(history)
    report = et.reports()[-1]
    assert any("is bool and read outside its group" in why for why in report.unfused.values()), report.unfused
    assert report.fused


class _Wrap(torch.nn.Module):
    def __init__(self, m, fn):
        super().__init__()
        self.m, self.fn = m, fn

    def forward(self, x):
        return self.fn(self.m, x)


def test_hand_written_erf_gelu_fuses_and_trains_like_eager():
    """0.5 x (1 + erf(x / sqrt 2)), as older BERT code spells GELU: torch.erf is an epilogue op,
    so the forward GEMM's group takes it (it was refused as "no erf op")."""
    import math

    class OldGelu(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(16, 64), torch.nn.Linear(64, 16)

        def forward(self, x):
            h = self.a(x)
            return self.b(h * 0.5 * (1.0 + torch.erf(h / math.sqrt(2.0))))
    torch.manual_seed(0)
    history = train_side_by_side(OldGelu(), torch.randn(8, 16), None, lambda y, _: (y * y).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=3)
    _assert_tight(history)
    report = et.reports()[-1]
    assert not any("erf" in why for why in report.unfused.values()), report.unfused
    plan = report.plan
    assert any(plan.graph.nodes[n].op == "erf" for k in report.fused for n in plan.groups[k]), report.fused


def test_a_forward_gemm_whose_output_is_returned_fuses_without_its_backward():
    """A model whose last op is gelu(x W) compiled without its loss: the output gradient
    (tangents_1) meets gelu' in the backward. On the joint graph's bytes alone the partitioner
    put that backward op in the forward GEMM's group, which the rewrite then refused whole
    ("tangents_1 is not computed in the same half"); the stage rule keeps them apart."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 12), torch.nn.GELU(approximate="tanh"))
    history = train_side_by_side(model, torch.randn(15, 8), None, lambda y, _: (y * y).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=2)
    _assert_tight(history)
    report = et.reports()[-1]
    plan = report.plan
    gemms = [k for k, grp in enumerate(plan.groups) if any(plan.graph.nodes[n].op in ("mm", "addmm") for n in grp)]
    assert sorted(report.fused) == gemms and not report.unfused, (report.fused, report.unfused)


def test_a_tensor_constant_in_forward_compiles_and_trains_like_eager():
    """torch.tensor(...) in forward (and y[:, :4] = 0, which makes one) is a real tensor the
    graph holds: the rewrite's fallback copy of the graph, taken under aot_autograd's fake mode,
    failed on it (a RuntimeError from torch, strict or not)."""
    scale = torch.arange(1.0, 9.0)

    def fn(m, x):
        y = torch.relu(m(x)) * torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
        y[:, :2] = 0
        return y * scale
    torch.manual_seed(0)
    history = train_side_by_side(_Wrap(torch.nn.Linear(16, 8), fn), torch.randn(6, 16), None,
                                 lambda y, _: (y * y).sum(), et.backend(kernels="numpy", strict=True), steps=2)
    _assert_tight(history)


def test_an_empty_batch_trains_like_eager():
    """0 rows: the forward GEMM (M = 0) and the weight gradient (K = 0) run as torch ops; the
    K = 0 one was fused and failed at its first call with a ShapeError, strict or not."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.ReLU())
    history = train_side_by_side(model, torch.randn(0, 16), None, lambda y, _: (y * y).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=1)
    _assert_tight(history)
    assert any("empty extent" in why for why in et.reports()[-1].unfused.values())


@pytest.mark.parametrize("rows,classes", [(7, 5), (5, 5), (6, 1)])
def test_cross_entropy_without_reduction_trains_like_eager(rows, classes):
    """reduction="none": the loss gradient is one value per row, which the decomposed
    nll_loss_backward multiplied into the row mask unbroadcast ((N,) by (N, 1) gave (N, N));
    planning failed, and with N = C the plan held (N, N) nodes."""
    torch.manual_seed(0)
    target = torch.randint(0, classes, (rows,))
    weight = torch.rand(rows)

    def fn(m, x):
        return (F.cross_entropy(m(x), target, reduction="none") * weight).sum()
    history = train_side_by_side(_Wrap(torch.nn.Linear(16, classes), fn), torch.randn(rows, 16), None,
                                 lambda y, _: y, et.backend(kernels="numpy", strict=True), steps=2)
    _assert_tight(history)


def test_a_rounding_cast_inside_an_epilogue_is_kept():
    """x.to(bfloat16).float() rounds on purpose: the lowering dropped the cast (the epilogue
    computes in fp32), so the fused result was the unrounded value. Now such a group runs as
    torch ops, named; a cast that only feeds a store stays fused (the store rounds)."""
    def fn(m, x):
        return m(x).to(torch.bfloat16).float() * 3.0
    torch.manual_seed(0)
    x = torch.randn(6, 16)
    history = train_side_by_side(_Wrap(torch.nn.Linear(16, 8), fn), x, None, lambda y, _: (y * y).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=1)
    _assert_tight(history)
    assert any("rounds to bfloat16 and" in why for why in et.reports()[-1].unfused.values())
    model = _Wrap(torch.nn.Linear(16, 8), lambda m, x: (m(x) * 3.0).to(torch.bfloat16))
    history = train_side_by_side(model, x, None, lambda y, _: (y.float() ** 2).sum(),
                                 et.backend(kernels="numpy", strict=True), steps=1)
    assert not any("rounds to" in why for why in et.reports()[-1].unfused.values())
