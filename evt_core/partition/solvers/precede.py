"""Acyclicity conflicts between unplaced nodes and placed groups, for the lower bounds.

`State.can_join` sees only v's direct order-predecessors, and only when v is next. The bounds
look further ahead: for an unplaced node x, let pre(x) be the placed groups that must precede x's
group or equal it. A placed u in order[x] gives grp[u]; an unplaced y in order[x] gives pre(y),
since group(y) precedes-or-equals group(x) (order edges chain). If x joined a placed group s
that already reaches some T in pre(x) (T != s: `reach[s]` never holds s), the quotient would
have the cycle s ~> T ~> s. Groups only grow and `reach` only grows along a search path, so a
conflict found now holds in every completion: x can never join s."""
from __future__ import annotations

from ..problem import Problem
from .state import State


def blocked_groups(p: Problem, st: State, k: int) -> list[int]:
    """blocked[x] (x >= k): mask of placed groups x can never join because of acyclicity;
    0 for x < k. Invariant: nodes 0..k-1 are placed, k.. are not (topological placement).
    O(|order| + closure size) big-int operations."""
    n, grp, reach = p.size, st.grp, st.reach
    blocked = [0] * n
    if not reach or not any(reach):
        return blocked
    # rev[T]: groups s that reach T (s != T).
    rev = [0] * len(reach)
    for s, r in enumerate(reach):
        while r:
            low = r & -r
            rev[low.bit_length() - 1] |= 1 << s
            r ^= low
    pre = [0] * n
    memo = {0: 0}                                # pre mask -> its blocked mask: nodes share
    for x in range(k, n):                        # their pre masks (chains), so this repeats
        m = 0
        for u in p.order[x]:
            m |= (1 << grp[u]) if u < k else pre[u]
        pre[x] = m
        b = memo.get(m)
        if b is None:
            b, r = 0, m
            while r:
                low = r & -r
                b |= rev[low.bit_length() - 1]
                r ^= low
            memo[m] = b
        blocked[x] = b
    return blocked
