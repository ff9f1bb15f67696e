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


def group_tree(g: Graph, group: list[str], needed: set[str]) -> GroupTree:
    """The epilogue Tree of a legal GEMM-anchored `group` (node names in graph order).
    `needed`: nodes of the group read by later groups or returned by the graph."""
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
    inputs, examples, consts = _operands(g, anchor, body, inside)
    outputs = {f"o{k}": n for k, n in enumerate(x for x in group if x in needed and x not in absorbed)}
    for key, n in outputs.items():
        node = g.nodes[n]
        shape = _reduced_shape(g, node) if node.kind is Kind.REDUCTION else node.shape
        examples[key] = np.empty(shape, DTYPES[node.dtype])
    param_of = {v: p for p, v in inputs.items()}
    ctx = SimpleNamespace(rank=len(anchor.shape), graph=g, frame=tuple(anchor.shape))

    def epilogue(**vals):
        env = {}
        value = lambda name: env[name] if name in env else consts.get(name, vals.get(param_of.get(name)))  # noqa: E731
        env[anchor.name] = vals["accum"]
        if anchor.op == "addmm":
            env[anchor.name] = float(anchor.attr("alpha")) * vals["accum"] + \
                float(anchor.attr("beta")) * value(anchor.arg("self"))
        for node in body:
            env[node.name] = OPS[node.op].tree(node, [value(i) for i in node.inputs], ctx)
        return {k: env[n] for k, n in outputs.items()}

    epilogue.__signature__ = inspect.Signature(
        [inspect.Parameter(p, inspect.Parameter.POSITIONAL_OR_KEYWORD) for p in ("accum", *inputs)])
    try:
        tree = evt_core.trace(epilogue, examples)
    except TraceError as e:
        if isinstance(e.__cause__, Unfusible):
            raise e.__cause__ from None
        raise
    first = "mat1" if anchor.op == "addmm" else "self"
    return GroupTree(tree, anchor, _operand(g, anchor, first, inside), _operand(g, anchor, "mat2", inside),
                     inputs, outputs, absorbed)


def _operands(g: Graph, anchor: Node, body, inside):
    """(tree parameter -> graph value, examples, uniform scalar constants -> float) for every
    value the epilogue reads from outside the group, in first-use order."""
    inputs, consts = {}, {}
    examples = {"accum": np.empty(anchor.shape, np.float32)}
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
