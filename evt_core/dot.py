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


def partition(name: str, plan, fused: set, unfused: dict) -> str:
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
        tag = "evt kernel" if k in fused else f"torch: {unfused[k]}" if k in unfused else "torch"
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
