"""Nucleus-rooted greedy growth (design doc 5.5): each node, in topological order, joins the
legal group holding its heaviest placed in-edges, else opens a group. O(N * E) at worst.
The baseline of the benchmark and the first incumbent of branch-and-bound."""
from __future__ import annotations

from ..problem import Problem
from .state import Solution, State, cost_of, split_connected


def solve_greedy(p: Problem, time_limit: float | None = None) -> Solution:
    st = State(p)
    for v in range(p.size):
        gains = st.gains(v)
        choice = next((s for s in sorted(gains, key=gains.get, reverse=True) if st.can_join(v, s)),
                      len(st.members))
        st.join(v, choice)
    groups = split_connected(p, _groups(st.grp))
    return Solution(tuple(groups), cost_of(p, groups), optimal=p.size <= 1, nodes_explored=p.size,
                    solver="greedy")


def _groups(grp: list[int]) -> list[tuple[int, ...]]:
    out: dict[int, list[int]] = {}
    for i, s in enumerate(grp):
        out.setdefault(s, []).append(i)
    return [tuple(v) for v in out.values()]

