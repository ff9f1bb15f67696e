"""Joint forward+backward graphs of real torch models, captured with aot_autograd, imported,
run through the passes and partitioned; the IR's NumPy semantics must reproduce torch's own
values. Skipped without torch (CI); run with a torch venv (see docs/partition.md)."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

from evt_core import partition as P  # noqa: E402
from evt_core.partition.fx_capture import import_module, torch_impls  # noqa: E402
from evt_core.partition.fx_import import aten_name  # noqa: E402

TOL = dict(rtol=1e-4, atol=1e-4)


def _mlp():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 10))
    x, t = torch.randn(8, 16), torch.randint(0, 10, (8,))
    return model, (lambda y, tgt: F.cross_entropy(y, tgt)), (x,), (t,)


def _encoder():
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(64, 4, dim_feedforward=128, dropout=0.0, activation="gelu",
                                       batch_first=True)
    return model, (lambda y: y.sum()), (torch.randn(2, 8, 64),), ()


def _conv_bn_relu():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU())
    return model, (lambda y: y.sum()), (torch.randn(2, 3, 8, 8),), ()


MODELS = {"mlp": _mlp, "encoder": _encoder, "conv_bn_relu": _conv_bn_relu}


@pytest.fixture(scope="module", params=sorted(MODELS))
def imported(request):
    model, loss, xs, ts = MODELS[request.param]()
    return request.param, model, loss, xs, ts, import_module(model, loss, *xs, targets=ts)


def _check_close(got, ref, names):
    for o, r in names:
        np.testing.assert_allclose(got[o], ref[r], err_msg=o, **TOL)


def test_imported_graph_matches_the_fx_graph(imported):
    name, *_, imp = imported
    g = imp.graph
    got = P.evaluate(g, imp.inputs, impls=torch_impls(g))
    _check_close(got, imp.reference(), [(o, o) for o in g.outputs])


def test_gradients_match_eager_autograd(imported):
    name, model, loss, xs, ts, imp = imported
    params = list(model.parameters())
    model.zero_grad()
    value = loss(model(*xs), *ts)
    value.backward()
    got = P.evaluate(imp.graph, imp.inputs, impls=torch_impls(imp.graph))
    # Flat joint outputs end with one gradient per primal; parameters come first among primals.
    n_out = len(list(_flat(imp.gm)))
    first_grad = n_out - (len(imp.primals))
    by_pos = dict(zip(imp.positions, imp.graph.outputs))
    for k, p in enumerate(params):
        np.testing.assert_allclose(got[by_pos[first_grad + k]], p.grad.numpy(), err_msg=f"grad {k}", **TOL)
    loss_pos = first_grad - 1
    np.testing.assert_allclose(got[by_pos[loss_pos]], value.detach().numpy(), **TOL)


def test_passes_and_partition_are_legal_and_preserve_gradients(imported):
    name, *_, imp = imported
    g = imp.graph
    g2 = P.run_pipeline(g)
    plan = P.partition(g2, cache=False)
    plan.check()
    assert plan.optimal
    ref = imp.reference()
    got = P.evaluate(g2, imp.inputs, impls=torch_impls(g2))
    # Loss elimination replaces the loss value by 1 (its gradient is the tangent input).
    keep = [(o2, o) for o, o2 in zip(g.outputs, g2.outputs) if g.nodes[o].op != "nll_loss_forward"]
    _check_close(got, ref, keep)


def test_raw_graph_partitions(imported):
    name, *_, imp = imported
    plan = P.partition(imp.graph, cache=False)
    plan.check()
    assert plan.optimal and len(plan.groups) < len(imp.graph.compute_nodes())


def test_known_aten_ops_map_onto_the_op_table(imported):
    name, *_, imp = imported
    opaque = {n.op for n in imp.graph.nodes.values() if n.attr("target") is not None}
    expected = set()
    assert opaque == expected
    assert aten_name(torch.ops.aten.mm.default) == "mm"
    assert aten_name(torch.ops.aten.add_.Tensor) == "add"


def _flat(gm):
    out = next(n for n in gm.graph.nodes if n.op == "output")

    def walk(x):
        if isinstance(x, (list, tuple)):
            for y in x:
                yield from walk(y)
        else:
            yield x
    return walk(out.args[0])


def test_ops_the_ir_cannot_express_stay_opaque_and_replay_in_torch():
    # Class-weighted cross-entropy: the IR's nll_loss ignores weights, so both nll ops are
    # imported as opaque nodes; evaluate replays them through torch.
    torch.manual_seed(0)
    model = nn.Linear(6, 5)
    t, w = torch.randint(0, 5, (4,)), torch.rand(5)
    imp = import_module(model, lambda y, t, w: F.cross_entropy(y, t, weight=w), torch.randn(4, 6),
                        targets=(t, w))
    g = imp.graph
    opaque = {n.op for n in g.nodes.values() if n.attr("target") is not None}
    assert opaque == {"nll_loss_forward.weighted", "nll_loss_backward.weighted"}
    got = P.evaluate(g, imp.inputs, impls=torch_impls(g))
    _check_close(got, imp.reference(), [(o, o) for o in g.outputs])
    plan = P.partition(P.run_pipeline(g))
    plan.check()
    assert all(len(grp) == 1 for grp in plan.groups if g.nodes.get(grp[0]) is not None
               and g.nodes[grp[0]].op in opaque)
