"""The boundary check between the partitioned IR graph and torch's fx graph."""
import dataclasses

import torch
import torch.nn.functional as F

from evt_core.partition import Graph, run_pipeline
from evt_core.partition.fx_capture import import_module
from evt_core.torch.planning import trusted_values

from .models import mlp, transformer_block


def _joint(model, loss, x, targets=()):
    return import_module(model, loss, x, targets=targets)


def test_every_value_of_the_raw_import_is_trusted():
    for model, x in ((mlp(), torch.randn(4, 16)), (transformer_block(), torch.randn(2, 8, 32))):
        imp = _joint(model, lambda y: y.square().mean(), x)
        why = trusted_values(imp.graph, imp.gm)
        assert why and not any(why.values()), {k: v for k, v in why.items() if v}


def test_the_eliminated_loss_is_not_trusted():
    g = torch.Generator().manual_seed(0)
    imp = _joint(mlp(), F.cross_entropy, torch.randn(6, 16, generator=g),
                 targets=(torch.randint(0, 8, (6,), generator=g),))
    why = trusted_values(run_pipeline(imp.graph), imp.gm)
    loss = next(n.name for n in imp.gm.graph.nodes if n.op == "call_function" and "nll_loss_forward" in str(n.target))
    assert why[loss]                                       # loss elimination: now a constant 1
    assert not why["primals_1"] and not why["addmm"]       # untouched forward values stay trusted


def test_distrust_flows_to_every_user_with_the_root_cause():
    imp = _joint(mlp(), lambda y: y.square().mean(), torch.randn(4, 16))
    nodes = [dataclasses.replace(n, op="sigmoid") if n.name == "relu" else n for n in imp.graph.nodes.values()]
    why = trusted_values(Graph.build(nodes, imp.graph.outputs), imp.gm)
    assert why["relu"] == "relu is relu in the fx graph but sigmoid after the graph passes"
    assert why["addmm_1"] == why["relu"]                   # addmm_1 reads relu
    assert not why["addmm"]


class _ViewChain(torch.nn.Module):
    """y = linear(x).view(2, 3, 8).view(6, 8) @ w: the passes fold the view of a view."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(16, 24)
        self.w = torch.nn.Parameter(torch.randn(8, 5))

    def forward(self, x):
        return self.lin(x).view(2, 3, 8).view(6, 8) @ self.w


def test_a_folded_view_chain_stays_trusted():
    """view(view(x, s1), s2) is view(x, s2) (row-major order either way): a value whose view
    chain the passes folded is the same computation; a view of another source is not."""
    imp = _joint(_ViewChain(), lambda y: y.square().sum(), torch.randn(2, 16))
    g = run_pipeline(imp.graph)
    views = [f for f in imp.gm.graph.nodes if f.op == "call_function" and "view" in str(f.target)
             and "view" in str(f.args[0].target)]
    assert views, "the fx graph has a view of a view"
    outer = views[0].name
    assert g.nodes[g.nodes[outer].inputs[0]].op != "view", "the passes folded the chain"
    assert not trusted_values(g, imp.gm)[outer]
    other = next(n for n in g.nodes.values() if n.name != g.nodes[outer].inputs[0] and n.op != "view")
    nodes = [dataclasses.replace(n, inputs=(other.name,)) if n.name == outer else n for n in g.nodes.values()]
    assert "views" in trusted_values(Graph.build(nodes, g.outputs), imp.gm)[outer]


def test_a_layer_norm_parameter_gradient_rewritten_as_a_sum_stays_trusted():
    """decompose_layer_norm_backward turns the weight and bias gradients (getitem 1 and 2 of
    native_layer_norm_backward) into sums under the getitem's name; the pass's invariant is that
    the sum IS that gradient, so the value stays trusted while the backward's operands are. A
    sum that a broken pass would leave under another getitem's name is not."""
    imp = _joint(transformer_block(), lambda y: y.square().sum(), torch.randn(2, 8, 32))
    g = run_pipeline(imp.graph)
    grads = [f for f in imp.gm.graph.nodes if f.op == "call_function" and "getitem" in str(f.target)
             and "native_layer_norm_backward" in str(getattr(f.args[0], "target", "")) and f.args[1] > 0
             and f.name in g.nodes]
    assert grads and all(g.nodes[f.name].op == "sum" for f in grads), "the passes decomposed them"
    why = trusted_values(g, imp.gm)
    assert not any(why[f.name] for f in grads), {f.name: why[f.name] for f in grads}
    # a plain getitem (the input gradient, index 0) turned into a sum is a mismatch still
    x0 = next(f for f in imp.gm.graph.nodes if f.op == "call_function" and "getitem" in str(f.target)
              and "native_layer_norm_backward" in str(getattr(f.args[0], "target", "")) and f.args[1] == 0
              and f.name in g.nodes)
    nodes = [dataclasses.replace(n, op="sum") if n.name == x0.name else n for n in g.nodes.values()]
    assert "is getitem in the fx graph but sum" in trusted_values(Graph.build(nodes, g.outputs), imp.gm)[x0.name]


def test_values_the_passes_merge_stay_trusted():
    """Two equal masks (and the zeros of two `where`s), which the graph passes merge into one
    node each: the removed one is trusted as the kept one's value, and a reader of it reads the
    same operands on both sides (constants compared on neither); a cross-entropy backward
    spells its mask twice like this."""
    def loss(y):
        return torch.where(y > 0, y, torch.zeros(())).sum() + torch.where(y > 0, 2 * y, torch.zeros(())).sum()
    imp = _joint(mlp(), loss, torch.randn(4, 16))
    g = run_pipeline(imp.graph)
    gts = [n.name for n in imp.gm.graph.nodes if n.op == "call_function" and "aten.gt" in str(n.target)]
    assert len(gts) == 2 and sum(name in g.nodes for name in gts) == 1       # the passes merged the masks
    why = trusted_values(g, imp.gm)
    wheres = [n.name for n in imp.gm.graph.nodes if n.op == "call_function" and "aten.where" in str(n.target)]
    assert wheres and all(not why[w] for w in wheres + gts if w in why), {w: why.get(w) for w in wheres + gts}
