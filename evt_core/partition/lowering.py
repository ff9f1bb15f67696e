"""A GEMM-anchored group as an evt_core epilogue Tree, built straight from the graph.

`group_tree(g, group, needed)` walks the group in graph order and applies each node's `tree`
rule (its ATen record) to traced values: the anchor is the accumulator, permutes the GEMM
absorbs become operand layouts, operands from outside the group become loads (uniform scalar
constants Python numbers), and the nodes later groups or the graph read become outputs. The
walk runs inside `evt_core.trace`, so the Tree goes through the core's own checks and pass
pipeline; no source text is generated. Anything the core cannot express raises `Unfusible`,
and the caller runs the group with NumPy instead."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from ..dtypes import DTYPES
from .aten import Unfusible
from .aten.structural import layout_perm
from .graph import Graph, Node
from .optable import GEMMS, OPS, Kind
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


def group_tree(g: Graph, group: list[str], needed: set[str], rebatch: bool = False) -> GroupTree:
    """The epilogue Tree of a legal GEMM-anchored `group` (node names in graph order).
    `needed`: nodes of the group read by later groups or returned by the graph. rebatch: let
    _rebatch turn a row split of the accumulator into a batch of the GEMM."""
    import evt_core
    from evt_core.errors import TraceError

    anchor = next((g.nodes[n] for n in group if g.nodes[n].kind is Kind.ANCHOR), None)
    if anchor is None or anchor.op not in GEMMS:
        raise Unfusible(f"the group has no GEMM anchor ({anchor.op if anchor else 'no anchor'})")
    inside = set(group)
    absorbed = tuple(n for n in group if n in {anchor.arg(p) for p in ("self", "mat1", "mat2")})
    body = [g.nodes[n] for n in group if n != anchor.name and n not in absorbed]
    for node in body:
        if isinstance(OPS[node.op].tree, str):
            raise Unfusible(f"{node.name} ({node.op}): {OPS[node.op].tree}")
    first = "mat1" if anchor.op == "addmm" else "self"
    a_operand = _operand(g, anchor, first, inside)
    split = _rebatch(g, anchor, body, needed) if rebatch and a_operand[1] is None else None
    frame, alias = tuple(anchor.shape), {}
    if split is not None:        # the view and the permute become the accumulator's own layout
        view, perm = split
        body = [n for n in body if n not in split]
        frame, alias = tuple(perm.shape), {perm.name: anchor.name}
    inputs, examples, consts = _operands(g, anchor, body, inside, frame)
    outputs = {f"o{k}": n for k, n in enumerate(x for x in group if x in needed and x not in absorbed)}
    for key, n in outputs.items():
        node = g.nodes[n]
        shape = _reduced_shape(g, node) if node.kind is Kind.REDUCTION else node.shape
        examples[key] = np.empty(shape, DTYPES[node.dtype])
    param_of = {v: p for p, v in inputs.items()}
    ctx = SimpleNamespace(rank=len(frame), graph=g, frame=frame)

    def epilogue(**vals):
        env = {}

        def value(name):
            name = alias.get(name, name)
            return env[name] if name in env else consts.get(name, vals.get(param_of.get(name)))
        env[anchor.name] = vals["accum"]
        if anchor.op == "addmm":
            env[anchor.name] = float(anchor.attr("alpha")) * vals["accum"] + \
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
    return GroupTree(tree, anchor, a_operand, _operand(g, anchor, "mat2", inside),
                     inputs, outputs, absorbed, a_view)


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
        examples[p] = np.empty(node.shape, DTYPES[node.dtype])
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
