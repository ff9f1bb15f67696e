"""The U-turn (EVT paper, 4.2): compute a loss's gradient in the forward GEMM's epilogue.

When the loss is part of the compiled graph, its gradient is the scalar tangent d loss/d loss
times a value the forward can already compute (BCE-with-logits: g · (sigmoid(y) - t)). Two
rewrites of aot_autograd's joint fx graph make that value forward work:

1. `sink_scalar_tangents` (before planning) moves the multiplication by a 0-d tangent past
   the linear ops that consume it (layouts, dtype casts, scalings by a number, GEMMs, sums):
   mm(t(g·X), W) becomes g·mm(t(X), W). X no longer depends on a tangent, so the partitioner may put it in the
   epilogue of the forward GEMM that produces its operand.
2. `pull_into_forward` (after planning) moves the tangent-free nodes of groups anchored in the
   forward into the forward half, so torch's partitioner saves X (as big as the GEMM output
   it replaces) instead of recomputing it in the backward.

The backward then runs its GEMMs on X with g applied in their epilogues: the elementwise pass
over the logits and its extra read and write of a GEMM-sized tensor are gone.

Numerics: X is stored unscaled (g·X was). With g = 1 (loss.backward()) nothing changes; under a
loss scale, entries of a 16-bit X below the format's normal range flush where g·X would not (the
GEMM itself accumulates in fp32 and applies g before rounding when it is fused). Training that
depends on those entries can turn the rewrite off: `backend(uturn=False)`."""
from __future__ import annotations

_LINEAR_VIEWS = frozenset({"t", "transpose", "permute", "view", "_unsafe_view", "reshape", "_to_copy", "clone"})
_GEMMS = frozenset({"mm", "bmm"})
_SUMS = frozenset({"sum"})
_SCALINGS = frozenset({"mul", "div"})      # by a Python number: a mean's 1/N


def sink_scalar_tangents(gm) -> int:
    """Rewrite `gm` (a joint graph) in place; return how many multiplications were sunk.
    Invariant: every value the graph returns is unchanged up to rounding: a 0-d factor
    commutes with each op it is moved past, since each is linear in that operand (a cast
    moves it past a rounding: g is 1 or a loss scale, a power of two, in training)."""
    graph = gm.graph
    tangent = _tangent_dependent(graph)
    sunk = 0
    for node in list(graph.nodes):
        split = _scalar_factor(node, tangent)
        if split is None:
            continue
        x, g = split
        if _sink(graph, node, x, g):
            sunk += 1
    if sunk:
        graph.lint()
        gm.recompile()
    return sunk


def pull_into_forward(gm, joint) -> list[str]:
    """Move into the forward half (graph order and partitioner tag, which torch's default
    partitioner follows) every tangent-free fx node of a fused group whose anchor the forward
    computes, with its tangent-free ancestors. Returns the moved names.
    Invariant: the graph stays topologically ordered, and a moved node reads only primals and
    forward nodes, so the forward can compute it."""
    graph = gm.graph
    nodes = {n.name: n for n in graph.nodes}
    tangent = _tangent_dependent(graph)
    forward = _forward_nodes(graph)
    wanted = []
    for k, gk in joint.kernels.items():
        anchor = nodes.get(gk.anchor)
        if anchor is None or anchor not in forward:
            continue
        for name in joint.plan.groups[k]:
            node = nodes.get(name)
            if node is not None and node not in forward and node not in tangent:
                wanted.append(node)
    closure = _ancestors_outside(wanted, forward)
    if not closure:
        return []
    last = max(forward, key=_position(graph))
    for node in (n for n in graph.nodes if n in closure):     # graph order is topological
        last.append(node)
        node.meta["partitioner_tag"] = "is_forward"
        last = node
    gm.recompile()
    return [n.name for n in graph.nodes if n in closure]


def _is_tangent(n) -> bool:
    return n.op == "placeholder" and str(n.target).startswith("tangents")   # aot_autograd's naming


def _is_primal(n) -> bool:
    return n.op == "placeholder" and str(n.target).startswith("primals")


def _tangent_dependent(graph) -> set:
    dep = set()
    for n in graph.nodes:
        if _is_tangent(n) or any(i in dep for i in n.all_input_nodes):
            dep.add(n)
    return dep


def _forward_nodes(graph) -> set:
    """The nodes torch's default partitioner puts in the forward: every non-tangent node up to
    the last one tagged forward (or primal)."""
    last = None
    for n in graph.nodes:
        if n.meta.get("partitioner_tag") == "is_forward" or _is_primal(n):
            last = n
    out = set()
    for n in graph.nodes:
        if not _is_tangent(n) and n.op != "output":
            out.add(n)
        if n is last:
            break
    return out


def _ancestors_outside(nodes, forward) -> set:
    out, stack = set(), list(nodes)
    while stack:
        n = stack.pop()
        if n in forward or n in out or n.op in ("placeholder", "output"):
            continue
        out.add(n)
        stack.extend(n.all_input_nodes)
    return out


def _position(graph):
    pos = {n: i for i, n in enumerate(graph.nodes)}
    return pos.__getitem__


def _op(node) -> str:
    from ..partition.fx_import import aten_name
    return aten_name(node.target) if node.op == "call_function" else ""


def _scalar_factor(node, tangent):
    """(X, g) if `node` is mul(X, g) or mul(g, X) with g a 0-d tangent-dependent tensor and X
    a tangent-free tensor of rank ≥ 1; else None."""
    if _op(node) != "mul" or len(node.args) != 2 or node.kwargs:
        return None
    a, b = node.args
    for x, g in ((a, b), (b, a)):
        if _is_node(g) and _op(g) == "expand" and _rank(g.args[0]) == 0:
            g = g.args[0]              # a sum's backward broadcasts the tangent: x · expand(g) = x · g
        if _is_node(x) and _is_node(g) and g in tangent and x not in tangent \
                and _rank(g) == 0 and (_rank(x) or 0) >= 1:
            return x, g
    return None


def _sink(graph, m, x, g) -> bool:
    """Move m = g·x past each user that is linear in it; True if m went away. A user reads m
    in one operand slot; g is 0-d, so every new mul has the user's shape and dtype (a 0-d
    tensor does not promote a tensor of its own kind)."""
    for user in list(m.users):
        op = _op(user)
        slots = [i for i, a in enumerate(user.args) if a is m]
        if len(slots) != 1 or any(v is m for v in user.kwargs.values()):
            continue
        by_number = op in _SCALINGS and not _is_node(user.args[1])
        if (op in _LINEAR_VIEWS or by_number) and slots == [0]:
            moved = _replace(graph, user, x, g, 0)
            _sink(graph, moved, moved.args[0], g)
        elif op in _GEMMS or (op in _SUMS and slots == [0] and "dtype" not in user.kwargs):
            _replace(graph, user, x, g, slots[0])
    if not m.users:
        graph.erase_node(m)
        return True
    return False


def _replace(graph, user, x, g, slot):
    """user(…, g·x, …) → g·user(…, x, …); returns the new mul node (its args[0] is the new user)."""
    import torch
    with graph.inserting_before(user):
        args = list(user.args)
        args[slot] = x
        inner = graph.call_function(user.target, tuple(args), dict(user.kwargs))
        _copy_meta(inner, user)
        inner.meta["val"] = _fake(user.target, tuple(args), user.kwargs)
        outer = graph.call_function(torch.ops.aten.mul.Tensor, (inner, g))
        _copy_meta(outer, user)
        outer.meta["val"] = _fake(torch.ops.aten.mul.Tensor, (inner, g), {})
    user.replace_all_uses_with(outer)
    graph.erase_node(user)
    return outer


def _copy_meta(new, old) -> None:
    for k in ("partitioner_tag", "stack_trace", "nn_module_stack", "seq_nr", "original_aten"):
        if k in old.meta:
            new.meta[k] = old.meta[k]


def _fake(target, args, kwargs):
    """The fake value of target(*args) from the fake values of its operands."""
    import torch
    from torch.fx.node import map_arg
    vals = map_arg(args, lambda n: n.meta["val"])
    kw = map_arg(kwargs, lambda n: n.meta["val"])
    mode = next(v.fake_mode for v in torch.utils._pytree.tree_leaves((vals, kw)) if hasattr(v, "fake_mode"))
    with mode:
        return target(*vals, **kw)


def _is_node(a) -> bool:
    return hasattr(a, "op") and hasattr(a, "meta")


def _rank(node):
    val = node.meta.get("val")
    return len(val.shape) if hasattr(val, "shape") else None
