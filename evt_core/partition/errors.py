"""The partitioner's one error type, raised through `check(cond, ...)` so every failure names
the rule that broke and the nodes involved."""
from __future__ import annotations

from evt_core.errors import EvtError


class PartitionError(EvtError):
    """A graph or plan breaks a rule of the partitioner.

    `rule` is a short identifier (e.g. "one-anchor", "acyclic", "unknown-op"), `nodes` the
    offending node names. The message says what to do; the usual causes are a hand-written
    plan that fuses a producer into a GEMM's mainloop, or an op the shape rules do not know
    (pass `shape=` and `dtype=` to `Graph.add` to declare it opaque)."""

    def __init__(self, rule: str, message: str, nodes=()):
        self.rule, self.message, self.nodes = rule, message, tuple(nodes)
        where = f" [nodes: {', '.join(self.nodes)}]" if self.nodes else ""
        super().__init__(f"{rule}: {message}{where}")


def check(cond: bool, rule: str, message: str, nodes=()) -> None:
    """Raise PartitionError(rule, message, nodes) unless `cond` holds."""
    if not cond:
        raise PartitionError(rule, message, nodes)
