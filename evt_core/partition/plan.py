"""A partition plan and the statistics of the solve that produced it."""
from __future__ import annotations

from dataclasses import dataclass, field

from .graph import Graph
from .legality import check_plan


@dataclass(frozen=True, slots=True)
class SolveStats:
    solver: str
    time_s: float = 0.0
    nodes_explored: int = 0          # search nodes (bnb), MIP nodes (milp), placements (greedy)
    components: int = 0              # components of the partition graph
    searched: int = 0                # components that needed a solver (size > 1, not cached)
    cache_hits: int = 0
    largest_component: int = 0
    merges: int = 0                  # component merges forced by a cross-component cycle
    proved_optimal: bool = False


@dataclass(frozen=True, eq=False)
class Plan:
    """`groups`: node-name lists in an executable order (each group only reads values of
    earlier groups or graph inputs); `cost`: bytes on edges between groups; `optimal`: the
    solver proved that no legal plan costs less."""
    graph: Graph
    groups: list[list[str]]
    cost: int
    optimal: bool
    stats: SolveStats = field(default_factory=lambda: SolveStats("none"))

    def check(self) -> None:
        """Raise PartitionError naming the rule and nodes if the plan is not legal."""
        check_plan(self.graph, self.groups)

    def group_of(self, name: str) -> int:
        return next(k for k, grp in enumerate(self.groups) if name in grp)

    def __repr__(self) -> str:
        return (f"Plan({len(self.groups)} groups, cost={self.cost} B, optimal={self.optimal}, "
                f"{self.stats.solver} {self.stats.time_s * 1e3:.1f} ms, {self.stats.nodes_explored} nodes)")
