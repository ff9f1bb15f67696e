"""Brute force over all set partitions of the compute nodes (Bell(8) = 4140 for 8 nodes),
legality by `legality.is_legal`: the independent oracle the tests compare solvers against."""
from __future__ import annotations

from .cost import plan_cost
from .errors import check
from .graph import Graph
from .legality import is_legal


def set_partitions(items: list):
    if not items:
        yield []
        return
    first, rest = items[0], items[1:]
    for part in set_partitions(rest):
        for k in range(len(part)):
            yield part[:k] + [[first] + part[k]] + part[k + 1:]
        yield [[first]] + part


def exhaustive_optimum(g: Graph, max_nodes: int = 9) -> tuple[int, list[list[str]]]:
    """(minimum cost, one optimal grouping) over every legal plan of `g`."""
    nodes = g.compute_nodes()
    check(len(nodes) <= max_nodes, "too-large", f"{len(nodes)} compute nodes; brute force stops at {max_nodes}")
    best = None
    for part in set_partitions(nodes):
        cost = plan_cost(g, part)
        if (best is None or cost < best[0]) and is_legal(g, part):
            best = (cost, part)
    return best
