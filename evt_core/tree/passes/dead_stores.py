"""Dead-store elimination.

Invariant established: every STORE names one of the tree's returned outputs, and each returned
name is stored exactly once. A store that is not an output (left by a rewrite or by hand-built
trees, CUTLASS's NoOp store) is replaced by its input, since a store returns its input.
Parameters that end up unused stay in `params`: callers may still pass them.
"""
from ...errors import TraceError
from ..ops import Op
from .rewrite import rewrite


def eliminate_dead_stores(tree):
    wanted = set(tree.result_names)

    def drop(node):
        if node.op is Op.STORE and node.arg.name not in wanted:
            return node.src[0]
        return node
    out = rewrite(tree, drop)
    stored = [n.arg.name for n in out.nodes() if n.op is Op.STORE]
    for name in wanted:
        if stored.count(name) != 1:
            raise TraceError(f"output {name!r} is stored {stored.count(name)} times; each output needs exactly one value")
    return out
