"""The torch integration on a CUDA GPU: the custom op on device tensors (in place, on the
caller's stream, captured in a CUDA graph) and torch.compile training against eager in fp16.
Run with the GPU suite (`pytest -m gpu tests/gpu`)."""
import copy

import numpy as np
import pytest

import evt_core
from evt_core import ops

torch = pytest.importorskip("torch")
et = pytest.importorskip("evt_core.torch")
pytestmark = pytest.mark.gpu

GPU_BACKENDS = ["cupy", "numba_cuda"]


@pytest.fixture(autouse=True)
def _gpu():
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU and a CUDA build of torch")
    torch._dynamo.reset()
    et.clear_reports()
    et.register()


def _available(name):
    s = evt_core.backends().get(name)
    if not s:
        pytest.skip(f"{name}: {getattr(s, 'reason', 'not registered')}")


def _epi(accum, C, alpha):
    F = alpha * accum + C
    D = ops.relu(F)
    F_colsum = ops.sum(F, over="M")
    return D, F_colsum


def _case(M=256, N=128, K=64):
    tree = evt_core.trace(_epi, {"accum": np.empty((M, N), np.float32), "C": np.empty((M, N), np.float16),
                                 "alpha": 0.5, "D": np.empty((M, N), np.float16),
                                 "F_colsum": np.empty((N,), np.float32)})
    g = torch.Generator(device="cuda").manual_seed(0)
    A, B, C = (torch.randn(*s, device="cuda", generator=g, dtype=torch.float16) for s in ((M, K), (K, N), (M, N)))
    F = 0.5 * (A.float() @ B.float()) + C.float()
    return tree, (A, B, C), F


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_op_on_device_tensors(backend):
    _available(backend)
    tree, (A, B, C), F = _case()
    out = et.kernel_op(tree, kernels=backend)(A, B, C=C, alpha=0.5)
    assert out["D"].is_cuda and out["D"].dtype == torch.float16
    torch.testing.assert_close(out["D"].float(), F.relu(), rtol=2e-3, atol=2e-3)
    torch.testing.assert_close(out["F_colsum"], F.sum(0), rtol=1e-3, atol=1e-2)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_op_runs_on_the_callers_stream(backend):
    _available(backend)
    tree, (A, B, C), F = _case()
    f = et.kernel_op(tree, kernels=backend)
    f(A, B, C=C, alpha=0.5)                       # compile and warm up on the default stream
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda._sleep(50_000_000)             # a long wait queued before the kernel on `side`
        C2 = C * 2                                # the kernel must see this, i.e. run after it
        out = f(A, B, C=C2, alpha=0.5)
    torch.cuda.current_stream().wait_stream(side)
    torch.testing.assert_close(out["D"].float(), (F + C.float()).relu(), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_op_in_a_cuda_graph(backend):
    _available(backend)
    tree, (A, B, C), F = _case()
    f = et.kernel_op(tree, kernels=backend)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            f(A, B, C=C, alpha=0.5)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = f(A, B, C=C, alpha=0.5)
    C.mul_(-1)
    graph.replay()
    torch.cuda.synchronize()
    F2 = 0.5 * (A.float() @ B.float()) + C.float()
    torch.testing.assert_close(out["D"].float(), F2.relu(), rtol=2e-3, atol=2e-3)


def _train(model, x, backend, steps=3):
    eager = copy.deepcopy(model)
    net = torch.compile(model, backend=backend, dynamic=False)
    errs = []
    for _ in range(steps):
        for m in (model, eager):
            m.zero_grad(set_to_none=True)
        if getattr(backend, "cudagraphs", False):
            torch.compiler.cudagraph_mark_step_begin()
        ours = net(x).float().square().mean()
        ours.backward()
        ref = eager(x).float().square().mean()
        ref.backward()
        num = sum(((p.grad.float() - q.grad.float()) ** 2).sum() for p, q in zip(model.parameters(), eager.parameters()))
        den = sum((q.grad.float() ** 2).sum() for q in eager.parameters())
        errs.append((abs(ours.item() - ref.item()) / max(abs(ref.item()), 1e-6), float((num / den).sqrt())))
        with torch.no_grad():
            for m in (model, eager):
                for p in m.parameters():
                    p -= 1e-2 * p.grad
    return errs


@pytest.mark.parametrize("cudagraphs", [False, True])
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_mlp_trains_like_eager_fp16(backend, cudagraphs):
    _available(backend)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 256)).cuda().half()
    x = torch.randn(512, 256, device="cuda", dtype=torch.float16)
    for loss_err, grad_err in _train(model, x, et.backend(kernels=backend, strict=True, cudagraphs=cudagraphs)):
        assert loss_err < 1e-2 and grad_err < 2e-2
    (rep,) = et.reports()
    assert rep.fused, rep.unfused


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_transformer_block_trains_like_eager_fp16(backend):
    _available(backend)
    torch.manual_seed(0)
    model = torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, batch_first=True,
                                             activation="gelu").cuda().half()
    x = torch.randn(4, 128, 256, device="cuda", dtype=torch.float16)
    for loss_err, grad_err in _train(model, x, et.backend(kernels=backend, strict=True)):
        assert loss_err < 1e-2 and grad_err < 3e-2
    assert any(r.fused for r in et.reports())


def _loss_trains_like_eager(model, ref, objective, x, t, backend, cudagraphs):
    """Three steps of objective(model) compiled with evt against objective(ref) eager: the loss
    within 1e-3 and every gradient within 2e-2 (relative); returns the graph's report."""
    compiled = torch.compile(objective(model), backend=et.backend(kernels=backend, strict=True,
                                                                    cudagraphs=cudagraphs), dynamic=False)
    for _ in range(3):
        for m in (model, ref):
            m.zero_grad(set_to_none=True)
        if cudagraphs:
            torch.compiler.cudagraph_mark_step_begin()
        loss = compiled(x, t)
        loss.backward()
        expect = objective(ref)(x, t)
        expect.backward()
        assert abs(float(loss) - float(expect)) <= 1e-3 * abs(float(expect))
        for p, q in zip(model.parameters(), ref.parameters()):
            assert float((p.grad.float() - q.grad.float()).norm() / q.grad.float().norm()) < 2e-2
    (rep,) = et.reports()
    return rep


@pytest.mark.parametrize("cudagraphs", [False, True])
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_bce_uturn_trains_like_eager_fp16(backend, cudagraphs):
    """Linear + BCE-with-logits compiled together: the forward kernel computes the loss (a
    whole-tensor sum) and d loss/d logits; the backward GEMMs read the 0-d tangent on the
    device. Shapes span several tiles and an edge tile in M and N."""
    _available(backend)
    torch.manual_seed(0)
    model = torch.nn.Linear(512, 1000).cuda().half()
    ref = copy.deepcopy(model)
    x = torch.randn(1100, 512, device="cuda", dtype=torch.float16)
    t = (torch.rand(1100, 1000, device="cuda") < 0.05).float()

    def objective(m):
        return lambda x, t: torch.nn.functional.binary_cross_entropy_with_logits(m(x).float(), t, reduction="sum")
    rep = _loss_trains_like_eager(model, ref, objective, x, t, backend, cudagraphs)
    assert set(rep.placed.values()) == {"forward", "backward"} and not rep.unfused, rep.unfused
    assert "sigmoid" in rep.pulled


@pytest.mark.parametrize("cudagraphs", [False, True])
@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_softmax_ce_trains_like_eager_and_saves_16_bit_logits(backend, cudagraphs):
    """Linear + cross-entropy on logits.float(): inductor runs the loss, the min-cut
    partitioner (saving.py) keeps the kernel's fp16 logits and two row statistics for the
    backward, never the fp32 log-probabilities. Shapes span several tiles and edge tiles."""
    _available(backend)
    torch.manual_seed(0)
    model = torch.nn.Linear(256, 352).cuda().half()
    ref = copy.deepcopy(model)
    x = torch.randn(1100, 256, device="cuda", dtype=torch.float16)
    t = torch.randint(0, 352, (1100,), device="cuda")

    def objective(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).float(), t, reduction="sum")
    rep = _loss_trains_like_eager(model, ref, objective, x, t, backend, cudagraphs)
    assert rep.partitioner == "min_cut" and rep.fused, (rep.partitioner, rep.unfused)
    assert "float16[1100, 352]" in rep.saved.values() and "float32[1100, 352]" not in rep.saved.values(), rep.saved


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_language_model_step_keeps_min_cut_and_trains_like_eager(backend):
    """A transformer block, a vocabulary head and a mean cross-entropy in one graph: min-cut
    saves the FFN GEMM's result, which the rewrite reads off the fused kernel's stored view
    (rewrite.view_of_output) instead of computing the GEMM again; the fp16 logits are saved,
    not fp32 log-probabilities. Rows and vocabulary span edge tiles."""
    _available(backend)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.TransformerEncoderLayer(256, 4, 1024, dropout=0.0, activation="gelu",
                                                                 batch_first=True),
                                torch.nn.Linear(256, 1000)).cuda().half()
    ref = copy.deepcopy(model)
    x = torch.randn(4, 130, 256, device="cuda", dtype=torch.float16)
    t = torch.randint(0, 1000, (4 * 130,), device="cuda")

    def objective(m):
        return lambda x, t: torch.nn.functional.cross_entropy(m(x).flatten(0, 1).float(), t)
    rep = _loss_trains_like_eager(model, ref, objective, x, t, backend, False)
    assert rep.partitioner == "min_cut" and rep.fused, (rep.partitioner, rep.unfused)
    assert "float16[520, 1000]" in rep.saved.values() and "float32[520, 1000]" not in rep.saved.values(), rep.saved


@pytest.mark.parametrize("backend", GPU_BACKENDS)
def test_a_0d_device_tensor_is_an_epilogue_input(backend):
    """A 0-d tensor (a loss's tangent) is loaded on the device, never read to the host."""
    _available(backend)
    from evt_core.tree.trace import TensorSpec
    M, N, K = 300, 200, 64
    tree = evt_core.trace(lambda accum, g: {"D": accum * g},
                          {"accum": np.empty((M, N), np.float32), "g": TensorSpec((), "float32"),
                           "D": np.empty((M, N), np.float16)})
    kernel = evt_core.compile(tree, backend=backend)
    A, B = (torch.randn(*s, device="cuda", dtype=torch.float16) for s in ((M, K), (K, N)))
    g = torch.tensor(0.75, device="cuda")
    out = kernel(A, B, g=g)
    (D,) = out.values()
    torch.testing.assert_close(D.float(), 0.75 * (A.float() @ B.float()), rtol=2e-2, atol=2e-2)
