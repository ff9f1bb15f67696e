"""One report per compiled graph: the plan, which groups ran as evt kernels and why the others
did not, the bytes the plan keeps on chip, and a drawing of the partition."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..partition.optable import GEMMS
from .. import dot


@dataclass
class Report:
    """`plan`: the `Plan` of the joint graph (None if planning failed: see `error`). `fused`:
    indices of the groups that run as evt kernels. `unfused`: {group index: reason} for the
    GEMM groups that run as torch ops instead (as in `RunResult`). `placed`: {fused group:
    the compiled graph it runs in, "forward", "backward" or "inference"}. `pulled`: backward nodes
    the U-turn moved into the forward (`uturn.py`). `rest`: how the ops outside evt
    kernels ran, "inductor" or "torch" (with the reason when inductor was asked for and not
    used: `backend(rest=...)`). `partitioner`: how the joint graph was split into forward and
    backward, "min_cut" or "default" (saving.py); `saved`: {name: "dtype[shape]"} of the tensors
    the forward keeps for the backward. `bytes_saved`: bytes on
    edges the plan keeps inside groups, against running every node as its own kernel."""
    name: str
    plan: object = None
    fused: list = field(default_factory=list)
    placed: dict = field(default_factory=dict)      # fused group -> "forward" | "backward" | "inference"
    refused: dict = field(default_factory=dict)     # reasons found so far, per group
    pending: set = field(default_factory=set)       # halves (forward/backward) not compiled yet
    pulled: list = field(default_factory=list)      # fx nodes moved into the forward (uturn.pull_into_forward)
    rest: str = ""                                  # how the other ops ran: "inductor" | "torch" (and why)
    partitioner: str = ""                           # "min_cut" | "default" (saving.py); "" for inference
    saved: dict = field(default_factory=dict)       # tensors the forward saves: {name: "dtype[shape]"}
    error: str | None = None

    @property
    def unfused(self) -> dict[int, str]:
        if self.plan is None:
            return {}
        g, out = self.plan.graph, {}
        for k, grp in enumerate(self.plan.groups):
            if k in self.fused or not any(g.nodes[n].op in GEMMS for n in grp):
                continue
            out[k] = self.refused.get(k) or (f"the {' and '.join(sorted(self.pending))} graph is not compiled yet"
                                             if self.pending else "its anchor is in neither compiled graph")
        return out

    @property
    def bytes_saved(self) -> int:
        if self.plan is None:
            return 0
        from ..partition import plan_cost
        g = self.plan.graph
        return plan_cost(g, [[n] for n in g.compute_nodes()]) - self.plan.cost

    def to_dot(self) -> str:
        """Graphviz source: one cluster per group (fused ones filled), edges between groups
        labelled with their bytes."""
        if self.plan is None:
            return f'digraph "{self.name}" {{ label="{dot.escape(self.error or "no plan")}" }}\n'
        return dot.partition(self.name, self.plan, self.placed, self.unfused)

    def to_svg(self) -> str:
        return dot.svg(self.to_dot())

    def __repr__(self) -> str:
        if self.plan is None:
            return f"<Report {self.name}: not planned ({self.error})>"
        g = self.plan.graph
        gemm = sum(any(g.nodes[n].op in GEMMS for n in grp) for grp in self.plan.groups)
        return (f"<Report {self.name}: {len(self.plan.groups)} groups, {gemm} GEMM groups, "
                f"{len(self.fused)} fused, {self.bytes_saved} B saved>")


