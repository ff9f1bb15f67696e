"""Turn a GEMM-anchored group into an evt_core epilogue function (design doc 6.1).

The anchor becomes the `accum` load; permutes absorbed into the GEMM become operand layouts;
every other node becomes one line of generated Python over `evt_core.ops`, and the function is
built from source text so that its parameter names are the group's input names (tracing reads
them). Anything the core cannot express raises `Unfusible`, and the caller runs the group with
NumPy instead."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .graph import Graph, Node
from .optable import GEMMS, Kind

_BIN = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "div": "{0} / {1}",
        "rsub": "{1} - {0}", "maximum": "ops.maximum({0}, {1})", "minimum": "ops.minimum({0}, {1})",
        "ge": "{0} >= {1}", "gt": "{0} > {1}", "le": "{0} <= {1}", "lt": "{0} < {1}"}
_UN = {"neg": "-{0}", "relu": "ops.relu({0})", "tanh": "ops.tanh({0})", "sigmoid": "ops.sigmoid({0})",
       "exp": "ops.exp({0})", "log": "ops.log({0})", "rsqrt": "ops.rsqrt({0})", "sqrt": "ops.sqrt({0})",
       "abs": "ops.abs({0})", "silu": "ops.silu({0})", "clone": "{0}", "reciprocal": "1.0 / {0}"}
_REDUCE = ("sum", "amax", "amin", "mean")


class Unfusible(Exception):
    """This group has a node the core cannot express; the message says which and why."""


@dataclass(frozen=True)
class GemmGroup:
    anchor: Node
    a: tuple[str, tuple[int, ...] | None]     # operand name and absorbed permutation (or None)
    b: tuple[str, tuple[int, ...] | None]
    source: str                               # generated epilogue function
    inputs: dict[str, str]                    # parameter name -> graph value
    outputs: dict[str, str]                   # returned key -> graph node
    examples: dict[str, object]
    absorbed: tuple[str, ...] = ()            # layout nodes folded into operand strides


def build(g: Graph, group: list[str], needed: set[str]) -> GemmGroup:
    """`needed`: nodes of the group read by later groups or returned by the graph."""
    anchor = next(g.nodes[n] for n in group if g.nodes[n].kind is Kind.ANCHOR)
    if anchor.op not in GEMMS:
        raise Unfusible(f"anchor {anchor.name} ({anchor.op}) is not a GEMM")
    inside = set(group)
    absorbed = {anchor.arg(p) for p in ("self", "mat1", "mat2") if anchor.arg(p) in inside}
    absorbed_nodes = sorted(absorbed, key=group.index)
    M_N = anchor.shape
    env, lines, inputs, examples = {anchor.name: "accum"}, [], {}, {"accum": np.empty(M_N, np.float32)}

    def ref(name):
        if name in env:
            return env[name]
        node = g.nodes[name]
        if node.op == "full" and np.ndim(node.attr("fill_value")) == 0 and node.kind is Kind.CONST:
            return repr(float(node.attr("fill_value")))
        if node.dtype not in ("float16", "float32"):
            raise Unfusible(f"{name} is {node.dtype}; epilogue loads are float16/float32")
        env[name] = f"in_{len(inputs)}"
        inputs[env[name]] = name
        examples[env[name]] = np.empty(node.shape, node.types[0].numpy_dtype())
        return env[name]

    if anchor.op == "addmm":
        beta, alpha = anchor.attr("beta", 1), anchor.attr("alpha", 1)
        env[anchor.name] = "v_bias"
        lines.append(f"v_bias = {float(alpha)!r} * accum + {float(beta)!r} * {ref(anchor.arg('self'))}")
    for n in group:
        node = g.nodes[n]
        if n == anchor.name or n in absorbed:
            continue
        env[n] = f"v{len(lines)}"
        lines.append(f"{env[n]} = {_expr(node, [ref(i) for i in node.inputs], len(M_N))}")
    outputs = {f"o{k}": n for k, n in enumerate(x for x in group if x in needed and x not in absorbed)}
    for key, n in outputs.items():
        node = g.nodes[n]
        shape = _reduced_shape(node, g) if node.op in _REDUCE else node.shape
        examples[key] = np.empty(shape, node.types[0].numpy_dtype())
    params = ", ".join(["accum", *inputs])
    body = "\n".join(f"    {ln}" for ln in lines) or "    pass"
    ret = ", ".join(f"{k!r}: {env[n]}" for k, n in outputs.items())
    source = f"def epilogue({params}):\n{body}\n    return {{{ret}}}\n"
    return GemmGroup(anchor, _operand(g, anchor, "mat1" if anchor.op == "addmm" else "self", inside),
                     _operand(g, anchor, "mat2", inside), source, inputs, outputs, examples,
                     tuple(absorbed_nodes))


def _operand(g: Graph, anchor: Node, param: str, inside: set[str]):
    name = anchor.arg(param)
    node = g.nodes[name]
    if name not in inside:
        return name, None
    if node.op == "permute":
        return node.inputs[0], tuple(node.attr("dims"))
    if node.op in ("t", "transpose"):
        return node.inputs[0], _operand_perm(node, len(node.shape))
    raise Unfusible(f"{name} feeds {anchor.name} inside its group but is not a layout op")


def _operand_perm(node: Node, rank: int) -> tuple[int, ...]:
    if node.op == "permute":
        return tuple(d % rank for d in node.attr("dims"))
    dims = list(range(rank))
    i, j = (0, 1) if node.op == "t" else (node.attr("dim0") % rank, node.attr("dim1") % rank)
    dims[i], dims[j] = dims[j], dims[i]
    return tuple(dims)


def _axes(rank: int):
    return {2: "MN", 3: "LMN"}.get(rank)


def _expr(node: Node, args: list[str], rank: int) -> str:
    op = node.op
    if op in _BIN:
        return _BIN[op].format(*args)
    if op in _UN:
        return _UN[op].format(*args)
    if op == "gelu":
        return f"ops.{'gelu_tanh' if node.attr('approximate') == 'tanh' else 'gelu'}({args[0]})"
    if op == "gelu_backward" and node.attr("approximate") == "tanh":
        return f"{args[0]} * ops.gelu_tanh_grad({args[1]})"
    if op == "threshold_backward":
        return f"ops.where({args[1]} > {float(node.attr('threshold'))!r}, {args[0]}, 0.0)"
    if op == "tanh_backward":
        return f"{args[0]} * (1.0 - {args[1]} * {args[1]})"
    if op == "sigmoid_backward":
        return f"{args[0]} * {args[1]} * (1.0 - {args[1]})"
    if op in ("permute", "t", "transpose") and len(node.shape) == rank:
        return f"ops.permute({args[0]}, {_operand_perm(node, rank)!r})"
    if op == "where":
        return f"ops.where({args[0]}, {args[1]}, {args[2]})"
    if op == "_to_copy" and node.dtype in ("float16", "float32", "bfloat16"):
        return args[0]        # the epilogue computes in fp32; rounding happens at the store
    if op in _REDUCE and len(node.shape) in (rank, rank - 1, rank - 2) and _axes(rank):
        from .shapes import dims_of
        over = tuple(_axes(rank)[d] for d in dims_of(node.attr("dim"), rank))
        return f"ops.{op}({args[0]}, over={over!r})"
    raise Unfusible(f"{node.name}: {op} has no epilogue spelling")


def _reduced_shape(node: Node, g: Graph):
    from .shapes import dims_of
    src = g.nodes[node.inputs[0]].shape
    dims = dims_of(node.attr("dim"), len(src))
    return tuple(n for i, n in enumerate(src) if i not in dims)
