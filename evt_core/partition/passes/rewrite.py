"""The one rewriting loop the passes share: walk the graph in order, let a rule replace each
node by a value of the new graph (or keep it), remap operands, then drop dead nodes."""
from __future__ import annotations

from typing import Callable, Optional

from ..graph import Graph, Node
from ..optable import OPS, Kind

# rule(node, new_graph, old_to_new) -> name of the value replacing `node`, or None to copy it.
Rule = Callable[[Node, Graph, dict], Optional[str]]


def rewrite(g: Graph, rule: Rule) -> Graph:
    out, m = Graph(), {}
    # Nodes a rule makes get names no later node of g has, so every copied node keeps its own
    # name (the torch backend matches IR values to fx values by name).
    out._reserved = frozenset(g.nodes)
    for node in g.nodes.values():
        new = rule(node, out, m)
        m[node.name] = new if new is not None else copy(out, node, [m[i] for i in node.inputs]).name
    out.outputs = [m[o] for o in g.outputs]
    return dce(out)


def copy(out: Graph, node: Node, inputs, name: str | None = None, **attrs) -> Node:
    """Insert `node` into `out` with new operands (and optionally new attributes)."""
    if node.op == "input":
        return out._insert(node)
    merged = tuple(sorted({**dict(node.attrs), **attrs}.items()))
    fresh = Node(name or _free(out, node.name), node.op, tuple(inputs), node.params, merged,
                 spelling=node.spelling)
    if node.op not in OPS:   # unknown op: its declared types (every output) travel with it
        return out._insert(Node(fresh.name, fresh.op, fresh.inputs, fresh.params, fresh.attrs, node.types))
    return out.insert(fresh)


def _free(out: Graph, name: str) -> str:
    return name if name not in out.nodes else out._fresh(name)


def dce(g: Graph) -> Graph:
    """Postcondition: every node is an input or reaches an output."""
    live, todo = set(g.outputs), list(g.outputs)
    while todo:
        for i in g.nodes[todo.pop()].inputs:
            if i not in live:
                live.add(i)
                todo.append(i)
    return Graph.build([n for n in g.nodes.values() if n.name in live or n.kind is Kind.INPUT], g.outputs)


def const_value(g: Graph, name: str):
    """The fill value of a uniform constant node, else None."""
    node = g.nodes[name]
    return node.attr("fill_value") if node.op == "full" else None
