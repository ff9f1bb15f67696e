"""Execute a plan group by group. GEMM-anchored groups become evt_core kernels compiled with
the chosen backend; every other group (and any GEMM group the core cannot express) runs
node by node with the NumPy semantics of the op records (`aten/`). Results agree with `evaluate(g)` up to
the rounding points fusion removes (fused intermediates stay fp32)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .aten import Unfusible
from .errors import check
from .evaluate import _round, eval_node, evaluate
from ..dtypes import DTYPES
from .lowering import group_tree
from .optable import Kind
from .plan import Plan


class RunResult(dict):
    """{output name: array}, plus `fused` (indices of groups that ran as evt_core kernels) and
    `unfused` ({group index: reason} for GEMM groups that fell back to NumPy)."""
    fused: list[int]
    unfused: dict[int, str]


def run(plan: Plan, inputs: Mapping[str, np.ndarray], backend: str = "numpy",
        impls: Mapping | None = None) -> RunResult:
    import evt_core
    from evt_core.errors import EvtError

    _check_arguments(plan, inputs, backend, evt_core)
    g = plan.graph
    env: dict[str, object] = {}
    for name, node in g.nodes.items():
        if node.kind is Kind.INPUT:
            env[name] = _round(np.asarray(inputs[name]), node.types[0], name)
        elif node.kind is Kind.CONST:
            env[name] = eval_node(node, env, impls)
    where = {n: k for k, grp in enumerate(plan.groups) for n in grp}
    needed = {u for n, k in where.items() for u in g.nodes[n].inputs if where.get(u, k) != k}
    needed |= set(g.outputs)
    result = RunResult()
    result.fused, result.unfused = [], {}
    for k, grp in enumerate(plan.groups):
        if any(g.nodes[n].op in ("mm", "bmm", "addmm") for n in grp):
            try:
                _run_gemm(g, grp, needed, env, evt_core, backend)
                result.fused.append(k)
                continue
            except (Unfusible, EvtError) as err:
                result.unfused[k] = str(err).splitlines()[0]
        for n in grp:
            env[n] = eval_node(g.nodes[n], env, impls)
    result.update({o: env[o] for o in g.outputs})
    return result


def _check_arguments(plan, inputs, backend, evt_core) -> None:
    check(isinstance(plan, Plan), "run", f"run() takes a Plan from P.partition(g), got {type(plan).__name__}",
          ("plan",))
    plan.graph.validate()
    check(isinstance(inputs, Mapping), "run", f"inputs must be a mapping {{input name: array}}, got "
          f"{type(inputs).__name__}", ("inputs",))
    missing = [n for n, node in plan.graph.nodes.items() if node.kind is Kind.INPUT and n not in inputs]
    check(not missing, "missing-input", "no value given for graph input(s)", missing)
    names = sorted(evt_core.backends())
    check(backend in names, "backend", f"unknown backend {backend!r}; registered: {names}", (str(backend),))


def _run_gemm(g, grp, needed, env, evt_core, backend) -> None:
    gt = group_tree(g, grp, needed)
    kernel = evt_core.compile(gt.tree, backend=backend)
    for n in gt.absorbed:          # later groups may read the permuted operand itself
        env[n] = eval_node(g.nodes[n], env)
    A, B = (_layout(env[name], perm) for name, perm in (gt.a, gt.b))
    if gt.b_view is not None:      # a column-split GEMM: B's column blocks are the batch
        B = np.ascontiguousarray(np.transpose(B.reshape(gt.b_view), (1, 0, 2)))
    # The tree is traced in the graph's own dtypes (bfloat16 as ml_dtypes' type); the NumPy
    # evaluator holds bfloat16 values as float32 already rounded to bfloat16, so the cast is exact.
    out = kernel(A, B, **{p: np.asarray(env[v]).astype(DTYPES[g.nodes[v].dtype], copy=False)
                          for p, v in gt.inputs.items()})
    for key, n in gt.outputs.items():
        env[n] = _round(np.asarray(out[key]).reshape(g.nodes[n].shape), g.nodes[n].types[0])
    for n in gt.peeled:            # trailing views the kernel left to us, on its outputs
        env[n] = eval_node(g.nodes[n], env)


def _layout(x, perm):
    return np.ascontiguousarray(np.transpose(x, perm)) if perm else x


__all__ = ["run", "RunResult", "evaluate"]
