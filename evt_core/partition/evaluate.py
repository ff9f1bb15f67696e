"""The NumPy reference evaluator: an env-dict walk over the graph (after JAX's eval_jaxpr).
It defines what a graph means; `run` must agree with it group by group."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import check
from .graph import Graph, Node
from .optable import OPS
from .types import is_float


def eval_node(node: Node, env: Mapping[str, object], impls: Mapping | None = None):
    """Value of `node` given its operands in `env`: an array, or a tuple for multi-output ops.
    Float operands are widened to float32 and every output is rounded to its declared dtype,
    so a node's rounding point is its output, as on the GPU."""
    fn = (impls or {}).get(node.op) or (OPS[node.op].impl if node.op in OPS else None)
    check(fn is not None, "no-semantics",
          f"op {node.op!r} has no NumPy semantics; pass impls={{{node.op!r}: fn}}", (node.name,))
    if node.op == "getitem":
        return _round(np.asarray(env[node.inputs[0]][node.attr("index")]), node.types[0], node.name)
    # Any other operand slot reads output 0 of a multi-output producer (Graph.reads).
    args = {p: _widen(_first(env[i])) for p, i in zip(node.params, node.inputs)}
    out = fn(**args, **dict(node.attrs))
    if len(node.types) > 1:
        return tuple(None if o is None else _round(np.asarray(o), t, node.name) for o, t in zip(out, node.types))
    return _round(np.asarray(out), node.types[0], node.name)


def evaluate(g: Graph, inputs: Mapping[str, np.ndarray], impls: Mapping | None = None,
             keep_all: bool = False) -> dict[str, np.ndarray]:
    """Evaluate `g` unpartitioned. Returns {output name: array} (every node's value when
    `keep_all`). Missing inputs raise PartitionError naming them."""
    check(isinstance(g, Graph), "evaluate", f"evaluate() takes a Graph, got {type(g).__name__}", ("g",))
    g.validate()
    check(isinstance(inputs, Mapping), "evaluate", f"inputs must be a mapping {{input name: array}}, got "
          f"{type(inputs).__name__}", ("inputs",))
    missing = [n for n, node in g.nodes.items() if node.op == "input" and n not in inputs]
    check(not missing, "missing-input", "no value given for graph input(s)", missing)
    env: dict[str, object] = {}
    for name, node in g.nodes.items():
        env[name] = _round(np.asarray(inputs[name]), node.types[0], name) if node.op == "input" \
            else eval_node(node, env, impls)
    return env if keep_all else {o: env[o] for o in g.outputs}


def _first(x):
    return x[0] if isinstance(x, tuple) else x


def _widen(x):
    if isinstance(x, np.ndarray) and x.dtype == np.float16:
        return x.astype(np.float32)
    return x


def _round(x: np.ndarray, t, who: str = "?") -> np.ndarray:
    check(tuple(x.shape) == t.shape, "shape", f"value of shape {tuple(x.shape)} where {t.shape} was declared "
          "or inferred", (who,))
    want = t.numpy_dtype()
    if x.dtype == want:
        return x
    with np.errstate(over="ignore"):     # past a 16-bit type's range: inf, IEEE's rounding (dtypes.round_to)
        return x.astype(want)


__all__ = ["evaluate", "eval_node", "is_float"]
