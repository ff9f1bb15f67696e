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

from ..dtypes import DTYPES
from ..errors import EvtError, UnsupportedError
from ..partition import Plan, partition, run_pipeline
from ..partition.aten import Unfusible
from ..partition.aten.structural import layout_perm
from ..partition.lowering import group_tree
from ..partition.fx_import import aten_name, from_fx
from ..partition.optable import ALIASES, GEMMS, Kind
from ..partition.passes.decompose_loss import KEPT_NAME_OPS
from ..partition.refine import layouts_with_their_gemm, narrow_stores
from ..tree.ops import Op
from . import ops as evt_ops

_IDENTITY = frozenset({"detach", "alias", "lift_fresh_copy"})   # the importer drops these
_LAYOUT = frozenset({"t", "transpose", "permute"})
_VIEW = "view"            # reshape and _unsafe_view are its aliases


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
    a_view: tuple | None = None      # lowering.GroupTree.a_view: A viewed so and permuted (1, 0, 2)
    b_view: tuple | None = None      # lowering.GroupTree.b_view: B viewed so and permuted (1, 0, 2)


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
               kernels: str = "auto", options: dict | None = None, rebatch: bool = False,
               fusing_rest: bool = False, bare_gemms: str = "evt") -> JointPlan:
    """`fusing_rest`: the ops outside evt kernels go to inductor, which folds a widening cast
    into its readers, so group outputs keep their 16-bit dtype (refine.narrow_stores).
    `bare_gemms`: "torch" runs a GEMM group with nothing to fuse (bare_gemm) as torch ops on a
    GPU; "evt" (the default) runs it as an evt kernel like every other group."""
    _check_static(gm)
    g = from_fx(gm)
    if passes:
        g = run_pipeline(g)
    plan = layouts_with_their_gemm(g, partition(g, solver=solver, time_limit=time_limit))
    if fusing_rest:
        plan = narrow_stores(g, plan)
    out = JointPlan(g, plan)
    where = {n: k for k, grp in enumerate(plan.groups) for n in grp}
    needed = {u for n, k in where.items() for u in g.nodes[n].inputs if where.get(u, k) != k} | set(g.outputs)
    trust = trusted_values(g, gm)
    fx = {f.name: f for f in gm.graph.nodes}
    for f in gm.graph.nodes:
        if f.op == "call_function" and aten_name(f.target) in _LAYOUT and hasattr(f.meta.get("val"), "shape"):
            rank = len(f.meta["val"].shape)
            out.layouts.setdefault(_source(f.args[0]), []).append((f.name, _fx_perm(f, rank)))
    sms = _gpu_sms(gm, kernels)
    device = "cuda" if _cuda_value(gm) is not None else "cpu"
    for k, grp in enumerate(plan.groups):
        if not any(g.nodes[n].op in GEMMS for n in grp):
            continue
        try:
            out.kernels[k] = _group_kernel(g, k, grp, needed, trust, kernels, options or {}, sms, device, rebatch, fx,
                                           bare_gemms)
        except (Unfusible, EvtError) as err:
            out.refused[k] = str(err).splitlines()[0]
    return out


def _check_static(gm) -> None:
    symbolic = [n.name for n in gm.graph.nodes if n.op == "placeholder"
                and not hasattr(n.meta.get("val"), "shape") and n.meta.get("val") is not None]
    if symbolic:
        raise UnsupportedError(f"the graph has dynamic shapes (symbolic inputs {symbolic[:4]}); evt plans static "
                               "shapes: compile with torch.compile(..., dynamic=False)")


def _group_kernel(g, k, grp, needed, trust, kernels, options, sms=None, device="cpu", rebatch=False,
                  fx=None, bare_gemms="evt") -> GroupKernel:
    gg = group_tree(g, grp, needed, rebatch)
    if 0 in _gemm_extents(g, gg)[:3]:     # (M or N = 0 is refused when the tree is traced)
        raise Unfusible(f"{gg.anchor.name} has an empty extent (M, N, K = {_gemm_extents(g, gg)[:3]}: an empty "
                        "batch); torch's op runs it")
    if sms:
        why = ("" if backend_splits_k(kernels, options) else split_k_reason(*_gemm_extents(g, gg), sms)) \
            or unaligned_operand_reason(g, gg)
        if why:
            raise Unfusible(why)
    tree = gg.tree
    if sms and bare_gemms == "torch" and bare_gemm(tree.program):
        raise Unfusible("the group has nothing to fuse (one output: the accumulator, at most plus a bias): "
                        "cuBLAS runs this GEMM (backend(bare_gemms='torch'))")
    for name in (gg.a[0], gg.b[0], *gg.inputs.values(), *gg.outputs.values()):
        if trust.get(name, "?"):
            raise Unfusible(trust.get(name) or f"{name} is not a value of the fx graph (the graph passes made it)")
    if gg.peeled:
        _check_peeled(g, grp, gg, fx or {})
    key = evt_ops.register(tree, kernels, **options)
    # Compiled now, not at the first training step: a tree the chosen backend refuses (an
    # option, an op, a dtype it lacks) makes this group run as torch ops, with the reason in
    # the report, instead of failing the step.
    evt_ops.entry(key).kernel(device)
    program = tree.program
    index = {r: i for i, r in enumerate(program.result_names)}
    outputs = [(index[key_], n, g.nodes[n].shape) for key_, n in gg.outputs.items()]
    inputs = [gg.inputs[op.name] for op in program.inputs]
    return GroupKernel(k, key, gg.a, gg.b, inputs, outputs, gg.anchor.name, gg.a_view, gg.b_view)


def _check_peeled(g, grp, gg, fx) -> None:
    """The views a group leaves to the fx graph (lowering.GroupTree.peeled) stay its own fx
    nodes, reading the kernel's results in place of the fx values of the same names. Invariant
    checked here: every fx operand of a peeled node is another peeled node, a layout the GEMM
    absorbs, a value from outside the group, or a kernel result with the shape and strides
    (over dims of extent > 1) of torch's own value. So the fx graph computes nothing of the
    group again, and each peeled view is torch's own view, elements and strides alike (an
    aten.view valid in torch's graph stays valid)."""
    from ..bind import output_strides
    by_key = {op.name: op for op in gg.tree.program.outputs}
    stored = {name: by_key.get(key) for key, name in gg.outputs.items()}
    inside, free = set(grp), set(gg.peeled) | set(gg.absorbed)
    for p in gg.peeled:
        if p not in fx:
            raise Unfusible(f"{p}, a view its group leaves to the fx graph, is not a node of the fx graph")
        for src in sorted({_source(a) for a in _fx_args(fx[p])}):
            if src in free or src not in inside:
                continue
            if src not in stored:
                raise Unfusible(f"the fx graph's {p} reads {src}, which the kernel of its group does not store")
            shape, val = tuple(g.nodes[src].shape), fx[src].meta.get("val")
            ours = output_strides(stored[src], shape) if stored[src] is not None else None
            theirs = tuple(val.stride()) if hasattr(val, "stride") else None
            if ours is None or theirs is None or len(theirs) != len(shape) or any(
                    n > 1 and a != b for n, a, b in zip(shape, ours, theirs)):
                raise Unfusible(f"{src} is stored with strides {ours} but torch's {src} has strides {theirs}, "
                                f"and the fx graph's view {p} reads it")


# A GEMM whose output is a handful of tiles over a long K (the weight gradient of a layer
# with many rows: K = the rows) keeps only a few SMs busy in a kernel that gives each output
# tile to one CTA; cuBLAS splits K across CTAs there. cupy's serial split-K (opt-in option
# split_k) stays 1.4-1.8 × slower than cuBLAS on these shapes (docs/backend-cupy.md), so such
# a group runs as torch ops: its GEMM output is written to memory either way, so only the
# group's epilogue fusion is given up, against an order of magnitude on the mainloop
# (measured: a 256×352 weight gradient over 736,392 rows took 73.8 ms fused against ~0.3 ms
# for cuBLAS).
_TILE = 128            # the smallest output tile edge of the GPU backends' Hopper kernels
_LONG_K = 4096


def split_k_reason(m: int, n: int, k: int, batch: int, sms: int) -> str:
    """Why a GEMM of this shape should not run as an evt kernel on `sms` SMs, or ''.
    Invariant: only shapes that fill under half of the SMs with 128×128 tiles and have
    K ≥ 4096 are refused, so every GEMM with a full wave of tiles stays fused."""
    tiles = -(-m // _TILE) * -(-n // _TILE) * batch
    if 2 * tiles >= sms or k < _LONG_K:
        return ""
    return (f"{m}×{n} (×{batch}) is {tiles} output tile(s) of {_TILE}×{_TILE} for {sms} SMs over K={k}: "
            "the evt kernels' split-K is slower than cuBLAS's here, so cuBLAS runs this GEMM")


def backend_splits_k(kernels: str, options: dict) -> bool:
    """Whether the caller asked the kernel backend to split K (option split_k given and not 1:
    "auto" or a count, an option of both GPU backends), so the rule above gives way and such
    GEMMs stay fused. Not by default: cupy's own default "auto" splits these GEMMs when they
    are called directly (0.94-1.22 × cuBLAS against 1.6-6.7 × unsplit, bench/RESULTS.md
    2026-12-07), but inside a training step the one measured (the MLP's two weight gradients)
    gained nothing against cuBLAS (0.254 ms a step either way), so cuBLAS keeps them unless
    asked."""
    return kernels != "numpy" and options.get("split_k", 1) != 1


# The GPU backends' fast mainloops read A and B by TMA (sm_90) or 16-byte cp.async copies
# (sm_80), both of which need every row of an operand to start on a 16-byte boundary. An operand
# whose rows do not (a 30,522-word vocabulary's logits gradient: rows of 61,044 bytes) is either
# copied first (cupy's M-major A: a transposing copy of the whole operand, 3.3 ms a step for the
# language model's 1 GB logits gradient on the H200) or read by the per-element fallback (the
# same model's dX GEMM: 12.1 ms against cuBLAS's 4.2; bench/RESULTS-train.md, 2026-12-02 run 75).
# cuBLAS has kernels for every alignment and inductor pads such GEMMs, so the group runs as torch
# ops and gives up only its epilogue fusion. Outputs are not in the rule: the same model's
# forward GEMM, whose 30,522-column output rows only the stores see, ran at 0.59 × cuBLAS fused.
_ROW_ALIGN = 16


def unaligned_operand_reason(g, gg) -> str:
    """Why a group's GEMM should not run as an evt kernel on a GPU because an operand's rows are
    not 16-byte multiples, or ''. Invariant: decided by each operand's innermost extent (the
    graph's values are dense), so a group whose A and B rows are 16-byte multiples stays fused."""
    for which, (name, _) in (("A", gg.a), ("B", gg.b)):
        node = g.nodes[name]
        inner, item = node.shape[-1] if node.shape else 1, DTYPES[node.dtype].itemsize
        if inner > 1 and (inner * item) % _ROW_ALIGN:
            return (f"operand {which} ({name}) has rows of {inner} {node.dtype} elements ({inner * item} bytes), "
                    f"not a multiple of {_ROW_ALIGN}: the evt kernels would copy it or load it element by element, "
                    "so cuBLAS runs this GEMM (pad that dimension to a multiple of 8 to fuse it)")
    return ""


# A group whose epilogue is only the accumulator, at most plus a bias, stored once saves no
# bytes against cuBLAS (whose epilogue adds a bias too) and only swaps cuBLAS's GEMM for evt's:
# on the H200 such BERT-Large groups took 764.5 µs fused against cuBLAS's 725.0 on the same
# operands (bench/RESULTS.md, run 73, groups 0, 4, 6, 7, 8). Whether the step gains by sending
# them to cuBLAS is not measured yet, so backend(bare_gemms="torch") is an option, off.
_BARE_OPS = frozenset({Op.ACCUM, Op.LOAD, Op.ADD, Op.STORE, Op.SINK, Op.PERMUTE, Op.RESHAPE})


def bare_gemm(program) -> bool:
    """Whether a group's program has nothing to fuse: no reduction, one output, no input but
    column vectors (a bias), and no op but the accumulator, loads, adds, layout steps and the
    store."""
    if program.reductions or len(program.outputs) != 1:
        return False
    if any(program.spans(t)[1] or not program.spans(t)[2] for t in program.inputs):
        return False
    return all(ins.op in _BARE_OPS for ins in program.instrs)


def _gemm_extents(g, gg) -> tuple[int, int, int, int]:
    """(M, N, K, L) of a group's GEMM, from its anchor's shape and its A operand."""
    *lead, m, n = gg.anchor.shape
    a_name, a_perm = gg.a
    a_shape = g.nodes[a_name].shape
    k = a_shape[a_perm[-1]] if a_perm else a_shape[-1]
    if gg.b_view is not None:        # a column-split GEMM: G batches of (M, H)
        lead, n = [gg.b_view[1]], gg.b_view[2]
    batch = 1
    for d in lead:
        batch *= d
    return m, n, k, batch


def _gpu_sms(gm, kernels) -> int | None:
    """The SM count of the GPU the graph's tensors live on, or None (CPU tensors, NumPy
    kernels): the split-K rule is a GPU cost rule only."""
    val = None if kernels == "numpy" else _cuda_value(gm)
    if val is None:
        return None
    import torch
    return torch.cuda.get_device_properties(val.device).multi_processor_count


def _cuda_value(gm):
    """A CUDA tensor among the graph's inputs (their fake values), or None."""
    for f in gm.graph.nodes:
        val = f.meta.get("val") if f.op == "placeholder" else None
        if getattr(getattr(val, "device", None), "type", None) == "cuda":
            return val
    return None


def trusted_values(g, gm) -> dict[str, str]:
    """{fx value name: "" if the IR value of that name is the same computation, else why not}.
    Same computation = same op (modulo the importer's aliases), same types, and the same
    tensor operands, each trusted in turn; chains of t/transpose/permute compare as (source,
    composed permutation), since permutation folding respells and cancels them. Trust is
    transitive on purpose: a pass may keep a name and change its value (loss elimination
    does, with the loss), so a value the passes rewrote anywhere upstream is not trusted."""
    _number_values(gm, g)
    why: dict[str, str] = {}
    for f in gm.graph.nodes:
        if f.op == "output" or (f.op == "call_function" and aten_name(f.target) in _IDENTITY):
            continue          # the importer drops identities; their users read the source
        reason = _local_reason(g, f)
        if not reason:        # an untrusted operand: keep the root cause, which names its node
            bad = next((src for src, _ in sorted(_trust_operands(f), key=str) if why.get(src, "?")), None)
            reason = "" if bad is None else why.get(bad) or f"{bad} is not a value of the fx graph"
        why[f.name] = reason
    return why


def _number_values(gm, g) -> None:
    """fx-side value numbering, mirroring the graph passes' CSE: an fx node the passes removed
    whose op, operands and arguments equal an earlier node's that they kept carries that
    node's value (two equal `ne` masks, two `full` constants of one value), recorded as
    meta["evt_same_as"], which _fx_canon follows. Only removed nodes are mapped, so a node
    the passes kept apart (an opaque op) is never merged here."""
    seen: dict = {}
    for f in gm.graph.nodes:
        f.meta.pop("evt_same_as", None)
        if f.op != "call_function":
            continue
        key = (f.target, _value_key(f.args), _value_key(tuple(sorted(f.kwargs.items()))))
        first = seen.setdefault(key, f.name)
        if first != f.name and f.name not in g.nodes and first in g.nodes:
            f.meta["evt_same_as"] = first


def _value_key(a):
    """A hashable spelling of fx arguments, each fx node by the value it carries."""
    if hasattr(a, "op") and hasattr(a, "meta"):
        return ("node", a.meta.get("evt_same_as", a.name))
    if isinstance(a, (list, tuple)):
        return tuple(_value_key(x) for x in a)
    return repr(a)


def _local_reason(g, f) -> str:
    node = g.nodes.get(f.name)
    if node is None and f.meta.get("evt_same_as"):
        return ""             # the value of the node it equals (its operands' trust is checked too)
    if node is None:
        return f"{f.name} is not a value of the partitioned graph (the graph passes removed it)"
    val = f.meta.get("val")
    vals = list(val) if isinstance(val, (list, tuple)) else [val]
    # Only tensor results are compared: the importer types the others (e.g. the seeds and
    # sizes flash attention returns) as placeholders nobody reads.
    if len(vals) != len(node.types) or any(
            hasattr(v, "shape") and (tuple(v.shape), str(v.dtype).replace("torch.", "")) != (t.shape, t.dtype)
            for v, t in zip(vals, node.types)):
        return f"{f.name} has another type in the fx graph than in the partitioned graph"
    if f.op in ("placeholder", "get_attr"):
        return "" if node.kind is Kind.INPUT else f"{f.name} is an fx input but {node.op} after the graph passes"
    op = aten_name(f.target)
    if op in _LAYOUT or node.op in _LAYOUT:
        if _fx_canon(f) != _ir_canon(g, f.name):
            return f"{f.name} permutes {_fx_canon(f)[0]} differently in the fx graph than after the graph passes"
        return ""
    if _ln_param_grad(f) and node.op == "sum":
        return ""       # decompose_layer_norm_backward's invariant: this sum is that gradient
    if node.op in KEPT_NAME_OPS.get(op, ()):
        return ""       # decompose_losses' invariant: the op's value under its own name, from the same operands
    if op == "div" and node.op == "mul" and any(g.nodes[i].kind is Kind.CONST for i in node.inputs):
        pass            # propagate_constants' invariant: x / c is x · (1/c), under x / c's name
    elif node.kind is Kind.OPAQUE and node.op.split(".")[0] == op:
        pass            # the importer's opaque form of this op (e.g. a CPU layer norm's 16-bit statistics)
    elif ALIASES.get(op, op) != ALIASES.get(node.op, node.op):
        return f"{f.name} is {op} in the fx graph but {node.op} after the graph passes"
    if ALIASES.get(op, op) == _VIEW:
        # view(view(x, s1), s2) is view(x, s2): both read x in row-major order, and a pass
        # folds such chains; the result's shape was compared above.
        if _fx_canon(_fx_view_source(f.args[0])) != _ir_canon(g, _ir_view_source(g, node.inputs[0])):
            return f"{f.name} views {_fx_view_source(f.args[0]).name} in the fx graph but " \
                   f"{_ir_view_source(g, node.inputs[0])} after the graph passes"
        return ""
    ir_in = {_ir_canon(g, i) for i in node.inputs if g.nodes[i].kind is not Kind.CONST}
    # constants are compared on neither side: propagate_constants respells and merges them
    fx_in = {c for c in _fx_operands(f) if c[0] not in g.nodes or g.nodes[c[0]].kind is not Kind.CONST}
    if fx_in != ir_in:
        return f"{f.name} reads {sorted(fx_in, key=str)} in the fx graph but {sorted(ir_in, key=str)} " \
               "after the graph passes"
    return ""


def _trust_operands(f) -> set:
    """The fx values f's trust depends on: a view's is its view chain's source (the passes may
    fold the views between), a layer-norm parameter gradient's are the backward's operands (the
    passes compute it from them as a sum), every other value's are its operands."""
    if f.op == "call_function" and ALIASES.get(aten_name(f.target), aten_name(f.target)) == _VIEW:
        return {_fx_canon(_fx_view_source(f.args[0]))}
    if _ln_param_grad(f):
        return _fx_operands(f.args[0])
    src = f.args[1] if f.op == "call_function" and aten_name(f.target) == "_log_softmax_backward_data" else None
    src = _fx_identity_source(src) if src is not None else None
    if src is not None and src.op == "call_function" and aten_name(src.target) == "_log_softmax":
        # decompose_losses reads the softmax of the forward's input, so the log-softmax itself
        # may be gone: trust rests on the gradient and that input
        return {_fx_canon(f.args[0])} | _fx_operands(src)
    if f.op == "call_function" and aten_name(f.target) == "nll_loss_backward":
        # decompose_losses builds it from the tangent, the target and the weight: of `self` (the
        # log-probabilities) it reads only the shape, and it counts the labels instead of
        # reading the forward's total_weight
        return {_fx_canon(a) for i, a in enumerate(f.args) if i not in (1, 6) and hasattr(a, "op")}
    return _fx_operands(f)


def _fx_identity_source(a):
    while hasattr(a, "op") and a.op == "call_function" and aten_name(a.target) in _IDENTITY:
        a = a.args[0]
    return a


def _ln_param_grad(f) -> bool:
    """getitem 1 or 2 (weight or bias gradient) of an fx native_layer_norm_backward: the value
    the partition passes rewrite as an explicit sum under the getitem's own name
    (passes/decompose_norm.decompose_layer_norm_backward)."""
    if f.op != "call_function" or aten_name(f.target) != "getitem" or len(f.args) < 2:
        return False
    src = f.args[0]
    return (hasattr(src, "op") and src.op == "call_function" and aten_name(src.target) == "native_layer_norm_backward"
            and isinstance(f.args[1], int) and f.args[1] > 0)


def _fx_view_source(a):
    """The first fx value up a chain of views (through the importer's identities)."""
    while a.op == "call_function" and ALIASES.get(aten_name(a.target), aten_name(a.target)) in _IDENTITY | {_VIEW}:
        a = a.args[0]
    return a


def _ir_view_source(g, name) -> str:
    while g.nodes[name].op == _VIEW:
        name = g.nodes[name].inputs[0]
    return name


def _fx_operands(f) -> set:
    return {_fx_canon(a) for a in _fx_args(f)}


def _fx_canon(a) -> tuple:
    """(source name, permutation or None) of an fx value, through identities, layouts and view
    chains back to their source's shape (row-major views compose, so such a chain is its
    source, and the passes fold it away)."""
    perm = None
    while a.op == "call_function":
        op = aten_name(a.target)
        if op in _IDENTITY | _LAYOUT:
            if op in _LAYOUT and hasattr(a.meta.get("val"), "shape"):
                perm = _compose(_fx_perm(a, len(a.meta["val"].shape)), perm)
            a = a.args[0]
        elif ALIASES.get(op, op) == _VIEW and _shape(_fx_view_source(a.args[0])) == _shape(a):
            a = _fx_view_source(a.args[0])
        else:
            break
    return a.meta.get("evt_same_as", a.name), perm


def _shape(a):
    val = a.meta.get("val")
    return tuple(val.shape) if hasattr(val, "shape") else None


def _ir_canon(g, name) -> tuple:
    """_fx_canon's counterpart on the partitioned graph (the same walk, so both sides agree
    whether or not a pass folded the views)."""
    perm, node = None, g.nodes[name]
    while True:
        if node.op in _LAYOUT:
            if len(node.shape) >= 2:
                perm = _compose(layout_perm(node, len(node.shape)), perm)
            node = g.nodes[node.inputs[0]]
        elif node.op == _VIEW and tuple(g.nodes[_ir_view_source(g, node.inputs[0])].shape) == tuple(node.shape):
            node = g.nodes[_ir_view_source(g, node.inputs[0])]
        else:
            return node.name, perm


def _compose(inner, outer):
    """permute(permute(x, inner), outer) = permute(x, p) with p[i] = inner[outer[i]]; None
    stands for the identity."""
    p = inner if outer is None else tuple(inner[i] for i in outer)
    return None if p == tuple(range(len(p))) else p


def _fx_perm(f, rank) -> tuple[int, ...]:
    op, dims = aten_name(f.target), list(range(rank))
    if op == "permute":
        return tuple(d % rank for d in f.args[1])
    i, j = (0, 1) if op == "t" else (f.args[1] % rank, f.args[2] % rank)
    if rank >= 2:
        dims[i], dims[j] = dims[j], dims[i]
    return tuple(dims)


def _fx_args(f):
    """The fx nodes among f's arguments (tensors, and tuples read through getitem)."""
    stack = list(f.args) + list(f.kwargs.values())
    while stack:
        a = stack.pop()
        if isinstance(a, (list, tuple)):
            stack.extend(a)
        elif hasattr(a, "op") and hasattr(a, "meta") and not isinstance(a.meta.get("val"), (int, float)):
            yield a


def _source(a) -> str:
    return _fx_identity_source(a).name
