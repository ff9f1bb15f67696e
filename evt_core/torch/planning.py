"""From a joint fx graph to fused GEMM groups: import (`from_fx`), the EVT graph passes, the
partitioner, then for every GEMM-anchored group its epilogue traced into a registered kernel.

The plan is solved on the IR graph, but execution rewrites the fx graphs torch hands to the
compilers (`rewrite.py`): a fused group replaces the fx nodes of its outputs by one
`torch.ops.evt.run` call reading the fx values of its inputs. That is only sound where the IR
and the fx graph agree on those boundary values, and the passes may rename or rewrite nodes
(loss elimination turns the loss into a constant 1 under the loss's own name), so every
boundary value is checked against the fx node of the same name: same op (modulo the
importer's aliases), same type, same tensor operands. A group that fails the check runs as
the fx graph's own torch ops, with the reason in the report."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import EvtError, UnsupportedError
from ..partition import Plan, partition, run_pipeline
from ..partition.epilogue import Unfusible, _operand_perm, build
from ..partition.fx_import import aten_name, from_fx
from ..partition.optable import ALIASES, GEMMS, Kind
from . import ops as evt_ops

_IDENTITY = frozenset({"detach", "alias", "lift_fresh_copy"})   # the importer drops these
_LAYOUT = frozenset({"t", "transpose", "permute"})


@dataclass
class GroupKernel:
    """One fused group. a/b: (fx value, permutation or None) of the GEMM operands; inputs: the
    fx values of the kernel's tensor inputs in `program.inputs` order; outputs: (result
    index, fx node it replaces, that node's shape)."""
    index: int
    key: str
    a: tuple
    b: tuple
    inputs: list
    outputs: list
    anchor: str


@dataclass
class JointPlan:
    graph: object                 # the IR graph that was partitioned (after the passes)
    plan: Plan
    kernels: dict = field(default_factory=dict)     # group index -> GroupKernel
    refused: dict = field(default_factory=dict)     # group index -> reason (GEMM groups)
    # fx value -> [(fx node, perm)]: nodes that are a permutation of it. A weight read by a
    # backward GEMM is saved as its transpose, so the backward finds the weight through these.
    layouts: dict = field(default_factory=dict)


def plan_graph(gm, passes: bool = True, solver: str = "bnb", time_limit: float | None = 30.0,
               kernels: str = "auto", options: dict | None = None) -> JointPlan:
    _check_static(gm)
    g = from_fx(gm)
    if passes:
        g = run_pipeline(g)
    plan = partition(g, solver=solver, time_limit=time_limit)
    out = JointPlan(g, plan)
    where = {n: k for k, grp in enumerate(plan.groups) for n in grp}
    needed = {u for n, k in where.items() for u in g.nodes[n].inputs if where.get(u, k) != k} | set(g.outputs)
    fx = {n.name: n for n in gm.graph.nodes}
    for f in fx.values():
        if f.op == "call_function" and aten_name(f.target) in _LAYOUT and hasattr(f.meta.get("val"), "shape"):
            rank = len(f.meta["val"].shape)
            out.layouts.setdefault(_source(f.args[0]), []).append((f.name, _fx_perm(f, rank)))
    for k, grp in enumerate(plan.groups):
        if not any(g.nodes[n].op in GEMMS for n in grp):
            continue
        try:
            out.kernels[k] = _group_kernel(g, k, grp, needed, fx, kernels, options or {})
        except (Unfusible, EvtError) as err:
            out.refused[k] = str(err).splitlines()[0]
    return out


def _check_static(gm) -> None:
    symbolic = [n.name for n in gm.graph.nodes if n.op == "placeholder"
                and not hasattr(n.meta.get("val"), "shape") and n.meta.get("val") is not None]
    if symbolic:
        raise UnsupportedError(f"the graph has dynamic shapes (symbolic inputs {symbolic[:4]}); evt plans static "
                               "shapes: compile with torch.compile(..., dynamic=False)")


def _group_kernel(g, k, grp, needed, fx, kernels, options) -> GroupKernel:
    import evt_core
    gg = build(g, grp, needed)
    ns = {"ops": evt_core.ops}
    exec(compile(gg.source, f"<epilogue of {gg.anchor.name}>", "exec"), ns)   # noqa: S102 - generated
    tree = evt_core.trace(ns["epilogue"], gg.examples)
    for name in (gg.a[0], gg.b[0], *gg.inputs.values(), *gg.outputs.values()):
        _check_boundary(g, name, fx)
    key = evt_ops.register(tree, kernels, **options)
    program = tree.program
    index = {r: i for i, r in enumerate(program.result_names)}
    outputs = [(index[key_], n, g.nodes[n].shape) for key_, n in gg.outputs.items()]
    inputs = [gg.inputs[op.name] for op in program.inputs]
    return GroupKernel(k, key, gg.a, gg.b, inputs, outputs, gg.anchor.name)


def _check_boundary(g, name, fx) -> None:
    """The IR value `name` is the fx node `name`'s value (see the module docstring)."""
    node, f = g.nodes[name], fx.get(name)
    if f is None:
        raise Unfusible(f"{name} is not a value of the fx graph (the graph passes made it)")
    val = f.meta.get("val")
    if val is None or tuple(val.shape) != node.shape or str(val.dtype).replace("torch.", "") != node.dtype:
        raise Unfusible(f"{name} has another type in the fx graph than in the partitioned graph")
    if f.op == "placeholder":
        if node.kind is not Kind.INPUT:
            raise Unfusible(f"{name} is an input of the fx graph but {node.op} after the graph passes")
        return
    op = aten_name(f.target)
    if op in _LAYOUT and node.op in _LAYOUT:   # permutation folding respells t/transpose as permute
        if _fx_perm(f, len(node.shape)) != _operand_perm(node, len(node.shape)):
            raise Unfusible(f"{name} permutes differently in the fx graph than after the graph passes")
    elif ALIASES.get(op, op) != ALIASES.get(node.op, node.op):
        raise Unfusible(f"{name} is {op} in the fx graph but {node.op} after the graph passes")
    fx_in = {_source(a) for a in _tensor_args(f)}
    ir_in = {i for i in node.inputs if g.nodes[i].kind is not Kind.CONST}
    if fx_in != ir_in:
        raise Unfusible(f"{name} reads {sorted(fx_in)} in the fx graph but {sorted(ir_in)} after the graph passes")


def _fx_perm(f, rank) -> tuple[int, ...]:
    op, dims = aten_name(f.target), list(range(rank))
    if op == "permute":
        return tuple(d % rank for d in f.args[1])
    i, j = (0, 1) if op == "t" else (f.args[1] % rank, f.args[2] % rank)
    if rank >= 2:
        dims[i], dims[j] = dims[j], dims[i]
    return tuple(dims)


def _tensor_args(f):
    stack = list(f.args) + list(f.kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif hasattr(a, "op") and hasattr(a, "meta") and hasattr(a.meta.get("val"), "shape"):
            yield a


def _source(a) -> str:
    while a.op == "call_function" and aten_name(a.target) in _IDENTITY:
        a = a.args[0]
    return a.name
