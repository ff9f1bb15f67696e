"""The visitor-tree IR: one immutable node type and the Tree that holds a traced epilogue.

A Node is (op, src, arg, shape). Nodes compare and hash structurally, so two identical
subexpressions are the same value: passes memoise on nodes, the cache key is structural, and
pass tests compare `after == expected` directly.

`shape` is the value's NumPy shape in the traced example (broadcast semantics), used for checks
and error messages; the role of every tensor (which problem axes it spans) is what a tree is
specialised on, never its extents.
"""
import numbers
from dataclasses import dataclass, field, replace
from typing import Any

from ..dtypes import float_bits
from .ops import AXES, LAYOUT, Op, REDUCTIONS


class Node:
    __slots__ = ("op", "src", "arg", "shape", "_hash")

    def __init__(self, op, src=(), arg=None, shape=()):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "src", tuple(src))
        object.__setattr__(self, "arg", arg)
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "_hash", hash((op, self.src, _hashable(_arg_key(op, arg)), self.shape)))

    def __setattr__(self, *_):
        raise AttributeError("Node is immutable; build a new one with .replace()")

    def __reduce__(self):
        # Slots plus the __setattr__ guard defeat pickle's default (it sets attributes one by
        # one), so a node rebuilds through __init__. The sub-DAG goes flat, operands by index,
        # so pickle and deepcopy neither recurse once per level (a deep chain would exhaust the
        # recursion limit) nor duplicate shared operands.
        nodes = postorder((self,), into_bodies=True)
        index = {n: i for i, n in enumerate(nodes)}
        rows = tuple((n.op, tuple(index[s] for s in n.src), index[n.arg] if n.op is Op.TOPO else n.arg, n.shape)
                     for n in nodes)
        return _unflatten, (rows,)

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        # Iterative (an explicit stack of node pairs, each pair once): comparing two equal
        # deep trees node by node would otherwise recurse once per level, through tuple ==.
        stack, done = [(self, other)], set()
        while stack:
            a, b = stack.pop()
            if a is b or (id(a), id(b)) in done:
                continue
            if not (isinstance(b, Node) and a._hash == b._hash and a.op is b.op and a.shape == b.shape
                    and len(a.src) == len(b.src)):
                return False
            if a.op is Op.TOPO and isinstance(a.arg, Node):
                stack.append((a.arg, b.arg))
            elif not _arg_key(a.op, a.arg) == _arg_key(b.op, b.arg):
                return False
            done.add((id(a), id(b)))          # both stay alive (reachable from self/other)
            stack.extend(zip(reversed(a.src), reversed(b.src)))
        return True

    def replace(self, **kw):
        d = {"op": self.op, "src": self.src, "arg": self.arg, "shape": self.shape}
        d.update(kw)
        return Node(**d)

    def __repr__(self):
        return f"Node({self.op.name}, {describe(self)!r}, shape={self.shape})"


def _unflatten(rows):
    """Node.__reduce__'s inverse: rows in post-order, operands (and a TOPO body) by index."""
    built = []
    for op, src, arg, shape in rows:
        built.append(Node(op, tuple(built[i] for i in src), built[arg] if op is Op.TOPO else arg, shape))
    return built[-1]


def fingerprint(node, _memo={}):
    """A process-stable structural digest of a node (hash() of strings is randomised per
    process, so canonical orders and on-disk cache keys use this instead)."""
    def known(n):
        hit = _memo.get(id(n))
        return hit[1] if hit is not None and hit[0] is n else None

    import hashlib
    # operands first, from an explicit stack: a deep chain must not recurse once per level
    stack = [node]
    while stack:
        n = stack[-1]
        if known(n) is not None:
            stack.pop()
            continue
        kids = n.src + ((n.arg,) if n.op is Op.TOPO else ())
        todo = [k for k in kids if known(k) is None]
        if todo:
            stack.extend(todo)
            continue
        stack.pop()
        arg = known(n.arg) if n.op is Op.TOPO else repr(n.arg)
        text = f"{n.op.value}({','.join(known(s) for s in n.src)};{arg};{n.shape})"
        _memo[id(n)] = (n, hashlib.sha1(text.encode()).hexdigest()[:16])
    return known(node)


def _arg_key(op, arg):
    """What nodes compare and hash `arg` by: a CONST is its exact float bits (dtypes.float_bits)."""
    if op is Op.CONST and isinstance(arg, numbers.Real):
        try:
            return float_bits(arg)
        except OverflowError:              # an int beyond float range: compare it as itself
            pass
    return arg


def _hashable(arg):
    try:
        hash(arg)
        return arg
    except TypeError:
        return repr(arg)


_INFIX = {Op.ADD: "+", Op.SUB: "-", Op.MUL: "*", Op.DIV: "/", Op.LT: "<", Op.LE: "<=", Op.GT: ">", Op.GE: ">="}


def describe(node, depth=3):
    """A short expression for error messages, e.g. `relu(alpha * accum + C)`."""
    op = node.op
    if op is Op.ACCUM:
        return "accum"
    if op in (Op.LOAD, Op.STORE):
        inner = "" if op is Op.LOAD else f"{describe(node.src[0], depth)} -> "
        return inner + node.arg.name
    if op is Op.SCALAR:
        return node.arg
    if op is Op.CONST:
        return repr(node.arg)
    if op is Op.ARG:
        return f"arg{node.arg}"
    if depth == 0:
        return "..."
    parts = [describe(s, depth - 1) for s in node.src]
    if op in _INFIX:
        return f"({parts[0]} {_INFIX[op]} {parts[1]})"
    if op is Op.NEG:
        return f"-{parts[0]}"
    if op in REDUCTIONS:
        return f"{op.value}({parts[0]}, over={''.join(sorted(node.arg))})"
    if op in LAYOUT:
        return f"{op.value}({parts[0]}, {node.arg})"
    return f"{op.value}({', '.join(parts)})"


@dataclass(frozen=True)
class Tree:
    """A traced epilogue. `roots` holds one STORE per returned name, in return order (after
    dag_to_tree, a single SINK or TOPO root joins them). `problem` is the traced (L, M, N)
    (L = 1 when unbatched)."""
    roots: tuple
    params: tuple
    problem: tuple
    batched: bool
    result_names: tuple
    specialised: bool = False
    program: Any = field(default=None, compare=False)

    def replace(self, **kw):
        return replace(self, **kw)

    def nodes(self):
        """Every node reachable from the roots (TOPO bodies included), post-order, once each."""
        return postorder(self.roots, into_bodies=True)

    def pretty(self):
        """One line per output: `D <- relu(...)`."""
        return "\n".join(describe(r, depth=6) for r in self.roots)

    def to_dot(self, name="tree"):
        """Graphviz source drawing the tree as one kernel, in the style of a partition report
        (`evt_core.torch.Report.to_dot`); `evt_core.dot.svg(tree.to_dot())` renders it."""
        from ..dot import tree
        return tree(self, name)

    def __repr__(self):
        return f"<Tree outputs={list(self.result_names)} batched={self.batched}>"


def postorder(roots, into_bodies=False):
    """Nodes reachable from `roots`, operands before users, each once (by structure)."""
    seen, order = set(), []

    def kids(n):
        return iter(n.src + (n.arg,) if into_bodies and n.op is Op.TOPO else n.src)
    # depth-first from an explicit stack (a deep chain must not recurse once per level); the
    # order is that of the recursive walk: operands left to right, then the TOPO body
    for r in roots:
        if r in seen:
            continue
        seen.add(r)
        stack = [(r, kids(r))]
        while stack:
            n, it = stack[-1]
            for k in it:
                if k not in seen:
                    seen.add(k)
                    stack.append((k, kids(k)))
                    break
            else:
                stack.pop()
                order.append(n)
    return order


def accum_axes(batched):
    return frozenset(AXES if batched else AXES[1:])
