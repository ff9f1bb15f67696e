"""The objective (the paper's): bytes on edges u->v between compute nodes in different
groups. Inputs and constants are read from memory whatever the plan, so they never count."""
from __future__ import annotations

from .graph import Graph
from .optable import Kind


def plan_cost(g: Graph, groups) -> int:
    where = {n: k for k, grp in enumerate(groups) for n in grp}
    cost = 0
    for v, node in g.nodes.items():
        if node.kind in (Kind.INPUT, Kind.CONST):
            continue
        for u in dict.fromkeys(node.inputs):
            if g.nodes[u].kind not in (Kind.INPUT, Kind.CONST) and where.get(u) != where.get(v):
                cost += g.edge_bytes(u, v)
    return cost
