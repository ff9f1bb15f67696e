"""Common-subexpression elimination.

Nodes are structural values, so two equal subexpressions already hash alike; what CSE adds is
canonical operand order for commutative ops (ADD, MUL, MAXIMUM, MINIMUM), so that `x*y` and
`y*x` become one node. Invariant established: no two distinct nodes in the tree are equal up
to commutative operand order.
"""
from ..ir import fingerprint
from ..ops import ELEMENTWISE
from .rewrite import rewrite


def eliminate_common_subexpressions(tree):
    def canon(node):
        info = ELEMENTWISE.get(node.op)
        if info is not None and info.commutative:
            return node.replace(src=tuple(sorted(node.src, key=fingerprint)))
        return node
    return rewrite(tree, canon)
