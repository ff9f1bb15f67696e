"""Put fused groups into one half (forward or backward) of the fx graph aot_autograd made.

A group runs in the half that computes its anchor, if that half also holds every value the
kernel reads (as computed nodes or as placeholders saved by the forward) and computes every
value of the group that is used outside it. Its output nodes' uses move to one
`torch.ops.evt.run` call; dead-code elimination then drops the group's fx nodes that nothing
else reads, and a stable topological sort puts the call after its inputs. Everything else
stays the fx graph's torch ops, on the same device."""
from __future__ import annotations

import operator

from ..errors import EvtError
from ..partition.fx_import import aten_name
from . import ops as evt_ops


def rewrite(gm, joint) -> tuple[list[int], dict[int, str]]:
    """Rewrite `gm` in place. Returns (indices of the groups placed here, {index: reason} for
    groups whose anchor is here but that cannot run fused)."""
    import torch
    run = evt_ops.define()
    nodes = {n.name: n for n in gm.graph.nodes}
    placed, refused = [], {}
    for k, gk in sorted(joint.kernels.items()):
        anchor = nodes.get(gk.anchor)
        if anchor is None or anchor.op != "call_function":
            continue
        a, b = (_reachable(op, nodes, joint.layouts) for op in (gk.a, gk.b))
        missing = [n for n in (a[0], b[0], *gk.inputs) if n not in nodes]
        missing += [n for _, n, _ in gk.outputs if n not in nodes or nodes[n].op != "call_function"]
        if missing:
            refused[k] = f"{missing[0]} is not computed in the same half (forward/backward) as {gk.anchor}"
            continue
        if gk.a_view is not None and a[1] is not None:
            refused[k] = f"the re-batched GEMM {gk.anchor} needs {gk.a[0]} itself, which this half holds only permuted"
            continue
        if _reads_its_own_result([nodes[a[0]], nodes[b[0]], *(nodes[n] for n in gk.inputs)],
                                 {nodes[n] for _, n, _ in gk.outputs}):
            refused[k] = f"in the fx graph, a value the group of {gk.anchor} reads depends on its results"
            continue
        try:
            evt_ops.entry(gk.key).kernel(_device_type(anchor))   # compile now, not mid-step
        except EvtError as err:
            refused[k] = str(err).splitlines()[0]
            continue
        _insert(gm.graph, gk, a, b, nodes, run, torch, set(joint.plan.groups[k]))
        placed.append(k)
    if placed:
        _topo_sort(gm.graph)
        gm.graph.eliminate_dead_code()
        gm.recompile()
    return placed, refused


def _reads_its_own_result(reads, results) -> bool:
    """A kernel reading an fx value computed from one of its own results would be a cycle.
    The IR plan is acyclic and trusted values have the same ancestry in both graphs, so this
    is a guard that keeps a rewrite from ever leaving a broken graph."""
    seen, stack = set(), list(reads)
    while stack:
        n = stack.pop()
        if n in results:
            return True
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return False


def _device_type(node) -> str:
    val = node.meta.get("val")
    return getattr(getattr(val, "device", None), "type", "cpu")


def _reachable(operand, nodes, layouts):
    """(value, perm) for a GEMM operand, respelt through a permutation of it that this half
    holds when the value itself is not here: X permuted by P = Y permuted by R, where Y is X
    permuted by Q and R[i] = Q^-1[P[i]]."""
    name, perm = operand
    if name in nodes:
        return operand
    for other, q in layouts.get(name, ()):
        if other in nodes:
            inv = {d: i for i, d in enumerate(q)}
            p = perm or tuple(range(len(q)))
            r = tuple(inv[d] for d in p)
            return other, (None if r == tuple(range(len(r))) else r)
    return operand


def _insert(graph, gk, a, b, nodes, run, torch, group) -> None:
    aten = torch.ops.aten
    last = next(n for n in reversed(graph.nodes) if n.op != "output")
    with graph.inserting_after(last):    # placed properly by _topo_sort
        a, b = (_operand(graph, nodes[name], perm, aten) for name, perm in (a, b))
        if gk.a_view is not None:     # a re-batched GEMM: a strided view, never a copy
            a = graph.call_function(aten.permute.default,
                                    (graph.call_function(aten.view.default, (a, list(gk.a_view))), [1, 0, 2]))
        if gk.b_view is not None:     # a column-split GEMM: B's column blocks as a batch, a strided view
            b = graph.call_function(aten.permute.default,
                                    (graph.call_function(aten.view.default, (b, list(gk.b_view))), [1, 0, 2]))
        call = graph.call_function(run, (gk.key, a, b, [nodes[n] for n in gk.inputs], []))
        stored = {}
        for index, name, shape in gk.outputs:
            value = graph.call_function(operator.getitem, (call, index))
            old = nodes[name]
            # Kernel results are shaped by the problem frame (a column sum is (N,) or (1, N));
            # the reshape gives the node's own shape and is a free view when they already agree.
            value = graph.call_function(aten.reshape.default, (value, list(shape)))
            if "val" in old.meta:
                value.meta["val"] = old.meta["val"]
            old.replace_all_uses_with(value)
            stored[old] = value
            nodes[name] = value      # later groups read the kernel's result
        for old, (value, shape) in _reshaped_to_outputs(group, nodes, stored).items():
            # a group value read outside the group (what min-cut chose to save) that a stored
            # output holds in another shape: a view of the kernel's result, never recomputed
            recovered = graph.call_function(aten.reshape.default, (value, list(shape)))
            recovered.meta.update({k: v for k, v in old.meta.items() if k == "val"})
            old.replace_all_uses_with(recovered)


# ops whose result holds its operand's elements in the same (row-major) order: a chain of them
# from a value to a stored output is undone by one reshape of the output
ORDER_KEEPING = frozenset({"view", "_unsafe_view", "reshape", "squeeze", "unsqueeze", "flatten", "alias"})
# ops whose result is a logical view of their operand: a chain of them from a stored output
# reads the kernel's result once the output's uses move to it (not as_strided, whose strides
# assume the replaced node's layout)
VIEWS = ORDER_KEEPING | {"permute", "transpose", "t", "select", "slice", "expand", "unbind"}


def view_of_output(node, outputs) -> str | None:
    """How a group value `node` that is not itself an output is had from the group's stored
    `outputs` (fx nodes) without computing it: "view" when it is a chain of VIEWS of an output
    (after the rewrite the chain reads the kernel's result), "reshape" when a chain of
    ORDER_KEEPING ops leads from it to an output (one reshape of the output gives it back),
    None when the group's own ops would have to compute it again (e.g. a GEMM's result whose
    group stores only an activation of it)."""
    n = node
    while n not in outputs and n.op == "call_function" and aten_name(n.target) in VIEWS:
        n = n.args[0]          # up: node = views(output)
    if n in outputs:
        return "view"
    return "reshape" if _reshape_of(node, outputs) is not None else None


def _reshape_of(node, outputs):
    """The output (of `outputs`) that a chain of ORDER_KEEPING ops leads to from `node`, or None."""
    stack, seen = [node], set()
    while stack:
        n = stack.pop()
        if n in outputs and n is not node:
            return n
        if n not in seen:
            seen.add(n)
            stack.extend(u for u in n.users
                         if u.op == "call_function" and aten_name(u.target) in ORDER_KEEPING and u.args[0] is n)
    return None


def _reshaped_to_outputs(group, nodes, stored) -> dict:
    """{fx node of the group read outside it: (the kernel's value it is a reshape of, its
    shape)}; group: the names of the group's nodes, stored: {replaced output node: value}."""
    out = {}
    for name in sorted(group):
        n = nodes.get(name)
        val = n.meta.get("val") if n is not None else None
        if n is None or n in stored or val is None or all(u.name in group for u in n.users):
            continue
        target = _reshape_of(n, stored)
        if target is not None:
            out[n] = (stored[target], list(val.shape))
    return out


def _operand(graph, node, perm, aten):
    if not perm:
        return node
    view = graph.call_function(aten.permute.default, (node, list(perm)))
    # 2-D transposes are strided operands every backend binds; other permutations are copied.
    return view if len(perm) == 2 else graph.call_function(aten.clone.default, (view,),
                                                           {"memory_format": _contiguous()})


def _contiguous():
    import torch
    return torch.contiguous_format


def _topo_sort(graph) -> None:
    """Reorder nodes so every node follows its inputs, keeping the existing order otherwise."""
    import heapq
    order = []
    pending = list(graph.nodes)
    position = {n: i for i, n in enumerate(pending)}
    indeg = {n: len(set(n.all_input_nodes)) for n in pending}
    users = {n: [] for n in pending}
    for n in pending:
        for i in set(n.all_input_nodes):
            users[i].append(n)
    heap = [(position[n], id(n), n) for n in pending if indeg[n] == 0]
    heapq.heapify(heap)
    while heap:
        _, _, n = heapq.heappop(heap)
        order.append(n)
        for u in users[n]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, (position[u], id(u), u))
    if len(order) != len(pending):   # pragma: no cover - the partitioner keeps groups acyclic
        raise EvtError("fused groups form a cycle in the fx graph")
    prev = order[0]
    for n in order[1:]:
        prev.append(n)
        prev = n
