"""The one traversal every pass uses: a memoised bottom-up rebuild of the tree.

Tree walks here never recurse once per tree level: an epilogue may be a chain of thousands of
ops, deeper than Python's recursion limit. `rewrite` keeps its own stack, and `drive` runs the
passes' recursive helpers, written as generators, on an explicit stack."""
from ..ops import Op


def rewrite(tree, fn):
    """Rebuild every node bottom-up: `fn(node)` receives a node whose operands (and TOPO body)
    are already rewritten and returns its replacement. Shared nodes are rewritten once."""
    memo = {}

    def kids(n):
        return n.src + (n.arg,) if n.op is Op.TOPO else n.src

    def visit(root):
        # the recursive walk (operands left to right, then the TOPO body, then fn) on an explicit
        # stack of (node, its children, their rewritten forms so far)
        if root in memo:
            return memo[root]
        stack = [(root, kids(root), [])]
        while True:
            n, todo, done = stack[-1]
            if len(done) < len(todo):
                k = todo[len(done)]
                if k in memo:
                    done.append(memo[k])
                else:
                    stack.append((k, kids(k), []))
                continue
            stack.pop()
            src = tuple(done[:len(n.src)])
            arg = done[-1] if n.op is Op.TOPO else n.arg
            # identity, not ==: an operand rebuilt equal to the old one would make == walk its
            # whole subtree again at every level (quadratic on a chain); a rebuilt equal node is
            # the same value either way
            same = all(a is b for a, b in zip(src, n.src)) and arg is n.arg
            out = fn(n if same else n.replace(src=src, arg=arg))
            memo[n] = out
            if not stack:
                return out
            stack[-1][2].append(out)
    return tree.replace(roots=tuple(visit(r) for r in tree.roots))


def drive(gen):
    """Run a recursive computation without Python recursion. The computation is a generator
    that yields a generator for each sub-computation (`x = yield walk(child)`) and is sent
    back that sub-computation's return value; drive returns the outermost one's. Exceptions
    propagate out unchanged, as from the recursive form."""
    stack, value = [gen], None
    while True:
        try:
            sub = stack[-1].send(value)
        except StopIteration as finished:
            stack.pop()
            if not stack:
                return finished.value
            value = finished.value
        else:
            stack.append(sub)
            value = None


def memoised(walk):
    """`walk`, a recursive generator for `drive`, with its results kept per arguments (what
    functools.lru_cache does for a plain recursive function)."""
    memo = {}

    def call(*args):
        if args in memo:
            return _returned(memo[args])
        return _remember(walk(*args), memo, args)
    return call


def _returned(value):
    return value
    yield                                  # unreachable: makes this a generator


def _remember(gen, memo, args):
    value = yield from gen                 # one level: gen's own sub-calls go to drive
    memo[args] = value
    return value
