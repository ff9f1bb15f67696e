"""Graphviz drawings of a partition (`Report.to_dot`) and of a traced tree (`Tree.to_dot`), in
one style: values are boxes labelled `name: op` with their shape, inputs are ellipses, groups
are clusters, fused groups are filled."""
from __future__ import annotations

import shutil
import subprocess

from .errors import UnsupportedError

FUSED, UNFUSED, PLAIN = "#cfe8cf", "#f6d5d5", "#ffffff"


def escape(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def header(name: str) -> list[str]:
    return [f'digraph "{escape(name)}" {{', "  rankdir=TB;",
            '  node [shape=box, fontname="Helvetica", fontsize=10];', '  edge [fontsize=8];']


def partition(name: str, plan, fused: dict, unfused: dict) -> str:
    """fused: {group index: where it runs (e.g. "backward")}; unfused: {group index: reason}."""
    from .partition.optable import Kind
    g = plan.graph
    where = {n: k for k, grp in enumerate(plan.groups) for n in grp}
    lines = header(name)
    for n, node in g.nodes.items():
        if n not in where:
            shape = "ellipse" if node.kind is Kind.INPUT else "plaintext"
            lines.append(f'  "{escape(n)}" [shape={shape}, label="{escape(n)}\\n{list(node.shape)}"];')
    for k, grp in enumerate(plan.groups):
        color = FUSED if k in fused else UNFUSED if k in unfused else PLAIN
        tag = f"evt kernel, {fused[k]}" if k in fused else f"torch: {unfused[k]}" if k in unfused else "torch"
        lines += [f"  subgraph cluster_{k} {{", f'    label="group {k} ({escape(tag[:60])})";',
                  f'    style=filled; fillcolor="{color}";']
        for n in grp:
            node = g.nodes[n]
            lines.append(f'    "{escape(n)}" [label="{escape(n)}: {node.op}\\n{node.dtype}{list(node.shape)}"];')
        lines.append("  }")
    for v, node in g.nodes.items():
        for u in dict.fromkeys(node.inputs):
            cut = where.get(u) is not None and where.get(u) != where.get(v)
            label = f' [label="{g.edge_bytes(u, v)} B", color=red]' if cut else ""
            lines.append(f'  "{escape(u)}" -> "{escape(v)}"{label};')
    lines.append("}")
    return "\n".join(lines) + "\n"


def svg(source: str) -> str:
    """SVG through the `dot` program or the `graphviz` package, whichever is installed."""
    exe = shutil.which("dot")
    if exe:
        return subprocess.run([exe, "-Tsvg"], input=source, capture_output=True, text=True, check=True).stdout
    try:
        import graphviz
    except ImportError:
        raise UnsupportedError("SVG needs graphviz: install the `dot` program or `pip install graphviz`; "
                               "to_dot() gives the source without it") from None
    return graphviz.Source(source).pipe(format="svg").decode()


def tree(t, name: str = "tree") -> str:
    """A traced tree as one kernel: its nodes in a filled cluster (it is one fused kernel),
    loads and the accumulator as inputs, stores labelled with their output names."""
    from .tree.ir import postorder
    from .tree.ops import Op
    nodes = postorder(t.roots, into_bodies=True)
    ids = {n: f"n{i}" for i, n in enumerate(nodes)}
    lines = header(name)
    outside = [n for n in nodes if n.op in (Op.LOAD, Op.SCALAR, Op.ACCUM)]
    for n in outside:
        label = "accum = A @ B" if n.op is Op.ACCUM else _leaf(n)
        lines.append(f'  {ids[n]} [shape=ellipse, label="{escape(label)}\\n{list(n.shape)}"];')
    lines += ["  subgraph cluster_kernel {", f'    label="{escape(name)} (one evt kernel)";',
              f'    style=filled; fillcolor="{FUSED}";']
    for n in nodes:
        if n not in outside:
            lines.append(f'    {ids[n]} [label="{escape(_leaf(n))}\\n{list(n.shape)}"];')
    lines.append("  }")
    for n in nodes:
        for s in n.src:
            lines.append(f"  {ids[s]} -> {ids[n]};")
        if n.op is Op.TOPO:
            lines.append(f"  {ids[n.arg]} -> {ids[n]} [style=dashed, label=body];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _leaf(n) -> str:
    from .tree.ops import Op, REDUCTIONS
    if n.op in (Op.LOAD, Op.STORE):
        return f"{n.op.value} {n.arg.name}"
    if n.op is Op.SCALAR:
        return f"scalar {n.arg}"
    if n.op is Op.CONST:
        return repr(n.arg)
    if n.op is Op.ARG:
        return f"arg{n.arg}"
    if n.op in REDUCTIONS:
        return f"{n.op.value} over {''.join(sorted(n.arg.over if hasattr(n.arg, 'over') else n.arg))}"
    if n.op in (Op.TOPO, Op.SINK):
        return n.op.value
    return n.op.value if n.arg is None else f"{n.op.value} {n.arg}"
