"""What the forward saves for the backward when inductor runs the ops outside evt kernels.

torch's default partitioner saves every forward value a backward op reads. For a loss that is
more than a GEMM epilogue can hold (softmax cross-entropy: a row-wide log-softmax), that is the
fp32 log-probabilities, twice the bytes of the 16-bit logits they come from, written once and
read back (measured: bench/RESULTS-train.md, runs 55-56). torch.compile instead decomposes the
loss ops and lets its min-cut partitioner choose: it saves the 16-bit logits and two row
statistics and recomputes the softmax inside the backward kernel that reads the logits anyway.

With inductor as the rest, evt does the same around its kernels, for graphs with such a loss:
- `decompositions`: inductor's decompositions of the loss ops (and of the ops whose
  decompositions those produce and that would otherwise tie the backward to a forward value:
  `zeros_like(log_probs)` reads only a shape, `detach` nothing at all), applied when
  aot_autograd traces the joint graph. Only these: the ops evt fuses (GEMMs, GELU, layer norm,
  casts) keep the ATen form the importer plans;
- `choose`: min-cut for a joint graph in which a loss op was decomposed, the default
  partitioner elsewhere (min-cut measured 14 % slower on a BERT-Large layer in run 58, when it
  saved a GEMM result whose kernel stores only a view of it and the GEMM ran twice; the
  rewrite now reads such a value off the kernel, not measured on a GPU since);
- `joint_graph_passes`: inductor's own rewrites of the joint graph, as its partition_fn runs
  them before min-cut: the decomposed nll_loss backward scatters into a zero tensor, which
  they turn into one pointwise `where(iota == target)` (measured: a 1 GB fp32 write and read
  otherwise, run 58);
- `partition`: torch's min-cut partitioner, with every node of a fused group pinned to the
  half its anchor runs in: forward groups are banned from recomputation (the backward can only
  read what the kernel stored), backward groups must be in the backward. Invariant: each fused
  group lies in one half, as `rewrite` needs; where the pins cannot say so (a node of a forward
  group that no forward output needs, which `uturn.pull_into_forward` places by the default
  partitioner's tag), the default partitioner runs instead; likewise where min-cut would save a
  value inside a fused group that the kernel does not store and that is no view of what it
  stores (see _saves_inside_a_group; a view, or a value a stored output is a reshape of, the
  rewrite reads off the kernel's result).
"""
from __future__ import annotations

import copy

PARTITIONERS = ("auto", "min_cut", "default")

_LOSS_OPS = frozenset({"_log_softmax", "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward",
                       "nll_loss2d_forward", "nll_loss2d_backward"})
_DECOMPOSED = _LOSS_OPS | {"zeros_like", "full_like", "ones_like", "empty_like", "detach"}


def _packet(op) -> str | None:
    return getattr(getattr(op, "overloadpacket", None), "__name__", None)


def decompositions() -> dict:
    """{OpOverload: decomposition} from inductor's table, for the ops named in _DECOMPOSED."""
    from torch._inductor.decomposition import select_decomp_table
    return {op: fn for op, fn in select_decomp_table().items() if _packet(op) in _DECOMPOSED}


def choose(partitioner: str, joint_gm) -> str:
    """"min_cut" or "default" for this joint graph (see the module docstring)."""
    if partitioner != "auto":
        return partitioner
    loss = any(_packet(n.meta.get("original_aten")) in _LOSS_OPS for n in joint_gm.graph.nodes)
    return "min_cut" if loss else "default"


def joint_graph_passes(joint_gm):
    """`joint_gm` after inductor's joint-graph passes (itself when this torch lacks them)."""
    try:
        from torch._inductor.fx_passes.joint_graph import joint_graph_passes as passes
    except ImportError:
        return joint_gm
    return passes(joint_gm) or joint_gm


def partition(joint_gm, joint_inputs, joint, how: str, **kw):
    """(forward, backward, the partitioner used) for `joint_gm`. `joint`: the JointPlan (None
    when planning gave up); how: "min_cut" or "default" (see the module docstring)."""
    from torch._functorch.partitioners import default_partition, min_cut_rematerialization_partition
    if how == "min_cut":
        trial = copy.deepcopy(joint_gm)       # min-cut rewrites its graph (CSE); the fallback needs the joint
        if _pin_groups(trial, joint, kw["num_fwd_outputs"]):
            fw, bw = min_cut_rematerialization_partition(trial, joint_inputs, compiler="inductor", **kw)
            if not _saves_inside_a_group(fw, joint, kw["num_fwd_outputs"]):
                return fw, bw, "min_cut"
    fw, bw = default_partition(joint_gm, joint_inputs, **kw)
    return fw, bw, "default"


def _saves_inside_a_group(fw, joint, num_fwd_outputs: int) -> bool:
    """Whether the forward saves a value a fused group computes but does not store and that is
    no view of what it stores (a GEMM's result whose group stores only an activation of it):
    the graph's own ops would compute it a second time, a whole GEMM again (measured: a
    BERT-Large layer 14 % slower, run 58). A view of a stored output, or a value a stored output
    is a reshape of (the FFN GEMM's result, stored as its 3-D view), costs nothing: the rewrite
    reads both off the kernel's result (rewrite.view_of_output)."""
    if joint is None:
        return False
    from .rewrite import view_of_output
    nodes = {n.name: n for n in fw.graph.nodes}
    saved = saved_values(fw, num_fwd_outputs)
    for k, kernel in joint.kernels.items():
        stored = {name for _, name, _ in kernel.outputs}
        outputs = {nodes[name] for name in stored if name in nodes}
        for name in set(joint.plan.groups[k]) - stored:
            if name in saved and view_of_output(nodes[name], outputs) is None:
                return True
    return False


def _pin_groups(gm, joint, num_fwd_outputs: int) -> bool:
    """Mark each fused group's fx nodes for the min-cut partitioner; False (and nothing marked)
    where a group would straddle the halves."""
    from torch.utils.checkpoint import CheckpointPolicy
    if joint is None:
        return True
    nodes = {n.name: n for n in gm.graph.nodes}
    forward = _forward_required(gm, num_fwd_outputs)
    marks = []
    for k, kernel in joint.kernels.items():
        members = [nodes[n] for n in joint.plan.groups[k] if n in nodes]
        in_forward = nodes.get(kernel.anchor) in forward
        if any((n in forward) != in_forward for n in members):
            return False
        marks += [(n, in_forward) for n in members]
    for n, in_forward in marks:
        if in_forward:
            n.meta["recompute"] = CheckpointPolicy.MUST_SAVE
        else:
            n.meta["partitioner_tag"] = "must_be_in_backward"
    return True


def _forward_required(gm, num_fwd_outputs: int) -> set:
    """The nodes the forward outputs depend on: what min-cut computes in the forward for sure."""
    out_node = next(n for n in reversed(gm.graph.nodes) if n.op == "output")
    stack = [a for a in out_node.args[0][:num_fwd_outputs] if hasattr(a, "op")]
    seen = set()
    while stack:
        n = stack.pop()
        if n not in seen:
            seen.add(n)
            stack.extend(n.all_input_nodes)
    return seen


def saved_values(fw, num_fwd_outputs: int) -> dict[str, str]:
    """{name: "dtype[shape]"} of the tensors the forward graph saves for the backward."""
    out_node = next(n for n in reversed(fw.graph.nodes) if n.op == "output")
    saved = {}
    for a in out_node.args[0][num_fwd_outputs:]:
        val = getattr(a, "meta", {}).get("val")
        if hasattr(val, "dtype") and hasattr(val, "shape"):
            saved[a.name] = f"{str(val.dtype).removeprefix('torch.')}{list(val.shape)}"
    return saved
