"""The one traversal every pass uses: a memoised bottom-up rebuild of the tree."""
from ..ops import Op


def rewrite(tree, fn):
    """Rebuild every node bottom-up: `fn(node)` receives a node whose operands (and TOPO body)
    are already rewritten and returns its replacement. Shared nodes are rewritten once."""
    memo = {}

    def visit(n):
        if n in memo:
            return memo[n]
        src = tuple(visit(s) for s in n.src)
        arg = visit(n.arg) if n.op is Op.TOPO else n.arg
        m = n if (src == n.src and arg is n.arg) else n.replace(src=src, arg=arg)
        out = fn(m)
        memo[n] = out
        return out
    return tree.replace(roots=tuple(visit(r) for r in tree.roots))
