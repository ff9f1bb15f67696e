"""A GEMM-anchored group as an evt_core epilogue Tree, built straight from the graph.

`group_tree(g, group, needed)` walks the group in graph order and applies each node's `tree`
rule (its ATen record) to traced values: the anchor is the accumulator, permutes the GEMM
absorbs become operand layouts, operands from outside the group become loads (uniform scalar
constants Python numbers), and the nodes later groups or the graph read become outputs. The
walk runs inside `evt_core.trace`, so the Tree goes through the core's own checks and pass
pipeline; no source text is generated. A group the core cannot express as it is gets two more
tries (`_variants`): its trailing views left to the caller (`_peelable`), and its accumulator
split into column blocks batched over the GEMM (`_column_splits`). Anything still
inexpressible raises the first attempt's `Unfusible` (or core error), and the caller runs the
group with NumPy instead."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..dtypes import DTYPES
from ..tree.trace import TensorSpec
from .aten import Unfusible
from .aten.structural import layout_perm
from .graph import Graph, Node
from .optable import GEMMS, OPS, RESHAPING, Kind
from .shapes import dims_of

_LOADABLE = ("float16", "bfloat16", "float32")


@dataclass(frozen=True)
class GroupTree:
    """What running a group as a kernel needs: `kernel(A, B, **{p: env[v] for p, v in
    inputs.items()})` returns {key: value of graph node outputs[key]}, where A/B are the
    graph values `a[0]`/`b[0]` transposed by `a[1]`/`b[1]` (None: as they are)."""
    tree: object                              # evt_core Tree, traced and lowered
    anchor: Node
    a: tuple[str, tuple[int, ...] | None]
    b: tuple[str, tuple[int, ...] | None]
    inputs: dict[str, str]                    # tree parameter -> graph value
    outputs: dict[str, str]                   # tree output -> graph node
    absorbed: tuple[str, ...] = ()            # layout nodes folded into operand strides
    # Re-batched GEMM (see _rebatch): A is the graph value a[0] viewed as this (M1, M0, K)
    # shape and permuted (1, 0, 2), and the accumulator is batched over M0; None: as above.
    a_view: tuple[int, ...] | None = None
    # Column-split GEMM (see _column_splits): B is the graph value b[0] (transposed by b[1])
    # viewed as this (K, G, H) shape and permuted (1, 0, 2), and the accumulator is (G, M, H),
    # batched over G with A broadcast; None: not split.
    b_view: tuple[int, ...] | None = None
    # Trailing views of the group (see _peelable), in group order, that the kernel does not
    # compute: the caller applies their own ops to the kernel's outputs (`outputs` holds every
    # group value they read) after it ran.
    peeled: tuple[str, ...] = ()


def group_tree(g: Graph, group: list[str], needed: set[str], rebatch: bool = False) -> GroupTree:
    """The epilogue Tree of a legal GEMM-anchored `group` (node names in graph order).
    `needed`: nodes of the group read by later groups or returned by the graph. rebatch: let
    _rebatch turn a row split of the accumulator into a batch of the GEMM. The group is
    lowered as it is first; only if that fails are its `_variants` tried, in order."""
    from evt_core.errors import EvtError

    anchor = next((g.nodes[n] for n in group if g.nodes[n].kind is Kind.ANCHOR), None)
    if anchor is None or anchor.op not in GEMMS:
        raise Unfusible(f"the group has no GEMM anchor ({anchor.op if anchor else 'no anchor'})")
    try:
        return _lower(g, group, needed, anchor, rebatch)
    except (Unfusible, EvtError) as err:
        first = err
    for peeled, cols in _variants(g, group, anchor):
        try:
            return _lower(g, group, needed, anchor, rebatch, peeled, cols)
        except (Unfusible, EvtError):
            continue
    raise first


def _variants(g: Graph, group: list[str], anchor: Node):
    """(peeled nodes, column split or None) to try after the group as it is: the column splits
    of the whole group, then its trailing views peeled off, alone and with each column split."""
    peel = _peelable(g, group, anchor)
    for k, peeled in enumerate(dict.fromkeys(((), peel))):
        for cols in ((None,) if k else ()) + _column_splits(g, group, anchor, peeled):
            yield peeled, cols


_NARROW = ("float16", "bfloat16")


def _check_no_inner_rounding(g: Graph, body: list[Node]) -> None:
    """The epilogue computes in fp32 and rounds only where it stores. A 16-bit op after a cast
    to 16 bits is thereby computed more precisely than eager's, as everywhere in the epilogue,
    but a cast to 16 bits and back to fp32 (`x.to(bfloat16).float()`) rounds on purpose, which
    an epilogue cannot express: such a group is refused, not silently unrounded."""
    for node in body:
        if node.op != "_to_copy" or node.dtype not in _NARROW or g.nodes[node.inputs[0]].dtype in _NARROW:
            continue
        todo = [node.name]
        while todo:
            value = todo.pop()
            for reader in (n for n in body if value in n.inputs):
                if reader.op == "_to_copy" and reader.dtype == "float32":
                    raise Unfusible(f"{node.name} rounds to {node.dtype} and {reader.name} widens it back to "
                                    "float32; the epilogue computes in float32 and rounds only at a store")
                if reader.op in RESHAPING:
                    todo.append(reader.name)


def _lower(g: Graph, group: list[str], needed: set[str], anchor: Node, rebatch: bool,
           peeled: tuple[str, ...] = (), cols: tuple[int, int] | None = None) -> GroupTree:
    import evt_core
    from evt_core import ops as E
    from evt_core.errors import TraceError

    inside = set(group)
    absorbed = tuple(n for n in group if n in {anchor.arg(p) for p in ("self", "mat1", "mat2")})
    body = [g.nodes[n] for n in group if n != anchor.name and n not in absorbed and n not in peeled]
    for node in body:
        if isinstance(OPS[node.op].tree, str):
            raise Unfusible(f"{node.name} ({node.op}): {OPS[node.op].tree}")
    _check_no_inner_rounding(g, body)
    first = "mat1" if anchor.op == "addmm" else "self"
    a_operand = _operand(g, anchor, first, inside)
    b_operand = _operand(g, anchor, "mat2", inside)
    split = _rebatch(g, anchor, body, needed) if rebatch and a_operand[1] is None and cols is None else None
    frame, alias = tuple(anchor.shape), {}
    if split is not None:        # the view and the permute become the accumulator's own layout
        view, perm = split
        body = [n for n in body if n not in split]
        frame, alias = tuple(perm.shape), {perm.name: anchor.name}
    if cols is not None:         # the accumulator's column blocks are the batch
        frame = (cols[0], anchor.shape[0], cols[1])
    inputs, examples, consts = _operands(g, anchor, body, inside, frame)
    # what the peeled views read from the group: kernel outputs even if nothing else reads them
    sources = {i for p in peeled for i in g.nodes[p].inputs if i in inside and i not in peeled}
    outputs = {f"o{k}": n for k, n in enumerate(
        x for x in group if (x in needed or x in sources) and x not in absorbed and x not in peeled)}
    for key, n in outputs.items():
        node = g.nodes[n]
        if node.dtype not in _LOADABLE:     # e.g. a comparison's mask that a later group reads
            raise Unfusible(f"{n} is {node.dtype} and read outside its group; epilogue stores are "
                            "float16/bfloat16/float32")
        shape = _reduced_shape(g, node) if node.kind is Kind.REDUCTION else node.shape
        examples[key] = np.empty(shape, DTYPES[node.dtype])
    param_of = {v: p for p, v in inputs.items()}
    ctx = SimpleNamespace(rank=len(frame), graph=g, frame=frame)

    def epilogue(**vals):
        env = {}

        def value(name):
            name = alias.get(name, name)
            return env[name] if name in env else consts.get(name, vals.get(param_of.get(name)))
        acc = vals["accum"]
        if cols is not None:     # the (M, N) accumulator from its (G, M, H) column blocks
            acc = E.reshape(E.permute(acc, (1, 0, 2)), tuple(anchor.shape))
        env[anchor.name] = acc
        if anchor.op == "addmm":
            env[anchor.name] = float(anchor.attr("alpha")) * acc + \
                float(anchor.attr("beta")) * value(anchor.arg("self"))
        for node in body:
            env[node.name] = OPS[node.op].tree(node, [value(i) for i in node.inputs], ctx)
        return {k: value(n) for k, n in outputs.items()}

    epilogue.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in ("accum", *inputs)])
    try:
        tree = evt_core.trace(epilogue, examples)
    except TraceError as e:
        if isinstance(e.__cause__, Unfusible):
            raise e.__cause__ from None
        raise
    a_view = None if split is None else (split[0].shape[0], split[0].shape[1], g.nodes[a_operand[0]].shape[-1])
    b_view = None if cols is None else (_extent(g, b_operand, 0), *cols)
    return GroupTree(tree, anchor, a_operand, b_operand, inputs, outputs, absorbed, a_view, b_view,
                     tuple(peeled))


_VIEWS = frozenset({"view", "permute", "transpose", "t", "unsqueeze", "squeeze", "select", "expand"})


def _peelable(g: Graph, group: list[str], anchor: Node) -> tuple[str, ...]:
    """The group's trailing views, in group order: nodes whose op only re-indexes its operand
    (`_VIEWS`: a view of it in torch, no data moves) and that no node of the group outside the
    set reads. Running them after the kernel, with their own ops on its outputs, computes the
    same values as the group, since the kernel still computes every other node. That is what
    a select of the accumulator (an attention block's Q, K and V out of one projection) needs:
    no epilogue op indexes, and the views after it (the head split) would need strides of
    several levels; peeled, the kernel stores what they read and the caller views it. The
    anchor and the layouts it absorbs as operand strides are never peeled."""
    absorbed = {anchor.arg(p) for p in ("self", "mat1", "mat2")}
    users = {n: [] for n in group}
    for n in group:
        for i in g.nodes[n].inputs:
            if i in users:
                users[i].append(n)
    peel: set[str] = set()
    for n in reversed(group):
        if n != anchor.name and n not in absorbed and g.nodes[n].op in _VIEWS and set(users[n]) <= peel:
            peel.add(n)
    return tuple(n for n in group if n in peel)


def _column_splits(g: Graph, group: list[str], anchor: Node, peeled) -> tuple[tuple[int, int], ...]:
    """(G, H) column splits of an (M, N = G * H) mm/addmm accumulator worth a try: those of the
    group's views that split a last dim of N into (G, H), as the fused QKV projection of
    attention does (N = 3 * hidden, viewed as (..., 3, hidden), the 3 moved to the front).
    With A @ B = reshape(permute(A @ B3, (1, 0, 2)), (M, N)), B3 = permute(view(B, (K, G, H)),
    (1, 0, 2)) and A broadcast over G, the (G, M, H) accumulator of that batched GEMM holds
    the column blocks in the layout the group moves them to, while the epilogue reads exactly
    the (M, N) values (the reshape and permute are traced), so the tree is exact whatever the
    group does and the core refuses what no strides express. Groups with reductions are not
    split: reductions name the problem axes of the frame, which then are (G, M, H)."""
    if anchor.op not in ("mm", "addmm") or len(anchor.shape) != 2:
        return ()
    n = anchor.shape[1]
    kept = [g.nodes[x] for x in group if x not in peeled]
    if any(x.kind is Kind.REDUCTION for x in kept):
        return ()
    return tuple(sorted({(x.shape[-2], x.shape[-1]) for x in kept if x.op == "view" and len(x.shape) >= 2
                         and x.shape[-2] > 1 and x.shape[-2] * x.shape[-1] == n
                         and g.nodes[x.inputs[0]].shape[-1] == n}))


def _extent(g: Graph, operand, dim: int) -> int:
    """Extent `dim` of a GEMM operand (graph value, permutation or None) as the GEMM reads it."""
    name, perm = operand
    shape = g.nodes[name].shape
    return shape[perm[dim]] if perm else shape[dim]


def _rebatch(g: Graph, anchor: Node, body, needed):
    """(view, permute) when the group reads its (M, N) accumulator only as
    permute(view(acc, (M1, M0, N)), (1, 0, 2)), else None. Then
    permute(view(A @ B, (M1, M0, N)), (1, 0, 2)) = permute(view(A, (M1, M0, K)), (1, 0, 2)) @ B:
    a GEMM batched over M0 whose A rows are strided (batch stride K, row stride M0 * K), so its
    accumulator is in the layout the group uses (a head or batch split that no output strides
    of the (M, N) frame can express). Invariant: neither the anchor nor the view is read
    outside the group (their (M, N) layouts are never computed), and an addmm's added
    operand is a row vector (it broadcasts over both batch and rows alike)."""
    if len(anchor.shape) != 2 or anchor.name in needed:
        return None
    (m, n) = anchor.shape
    users = [x for x in body if anchor.name in x.inputs]
    if len(users) != 1 or users[0].op != "view" or users[0].name in needed:
        return None
    view = users[0]
    if len(view.shape) != 3 or view.shape[2] != n or view.shape[0] * view.shape[1] != m:
        return None
    perms = [x for x in body if view.name in x.inputs]
    if len(perms) != 1 or perms[0].op not in ("permute", "transpose") or \
            layout_perm(perms[0], 3) != (1, 0, 2):
        return None
    if anchor.op == "addmm" and any(e != 1 for e in g.nodes[anchor.arg("self")].shape[:-1]):
        return None
    return view, perms[0]


def _operands(g: Graph, anchor: Node, body, inside, frame):
    """(tree parameter -> graph value, examples, uniform scalar constants -> float) for every
    value the epilogue reads from outside the group, in first-use order; the accumulator's
    example has the shape `frame`."""
    inputs, consts = {}, {}
    examples = {"accum": np.empty(frame, np.float32)}
    reads = ([anchor.arg("self")] if anchor.op == "addmm" else []) + \
        [i for node in body for i in node.inputs]
    for name in reads:
        if name in inside or name in consts or name in inputs.values():
            continue
        node = g.nodes[name]
        if node.kind is Kind.CONST and np.ndim(node.attr("fill_value")) == 0:
            consts[name] = float(node.attr("fill_value"))
            continue
        if node.dtype not in _LOADABLE:
            raise Unfusible(f"{name} is {node.dtype}; epilogue loads are float16/bfloat16/float32")
        p = f"in_{len(inputs)}"
        inputs[p] = name
        # A 0-d tensor (a loss's tangent, on the device) stays a tensor load: as a 0-d array
        # example it would trace as a by-value scalar, which the caller would have to read to
        # the host first (a sync, and no CUDA-graph capture).
        examples[p] = TensorSpec((), node.dtype) if node.shape == () else np.empty(node.shape, DTYPES[node.dtype])
    return inputs, examples, consts


def _operand(g: Graph, anchor: Node, param: str, inside: set[str]):
    name = anchor.arg(param)
    node = g.nodes[name]
    if name not in inside:
        return name, None
    if node.op in ("permute", "t", "transpose"):
        return node.inputs[0], layout_perm(node, len(node.shape))
    raise Unfusible(f"{name} feeds {anchor.name} inside its group but is not a layout op")


def _reduced_shape(g: Graph, node: Node):
    src = g.nodes[node.inputs[0]].shape
    dims = dims_of(node.attr("dim"), len(src))
    return tuple(n for i, n in enumerate(src) if i not in dims)
