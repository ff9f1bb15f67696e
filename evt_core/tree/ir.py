"""The visitor-tree IR: one immutable node type and the Tree that holds a traced epilogue.

A Node is (op, src, arg, shape). Nodes compare and hash structurally, so two identical
subexpressions are the same value: passes memoise on nodes, the cache key is structural, and
pass tests compare `after == expected` directly.

`shape` is the value's NumPy shape in the traced example (broadcast semantics), used for checks
and error messages; the role of every tensor (which problem axes it spans) is what a tree is
specialised on, never its extents.
"""
from dataclasses import dataclass, field, replace
from typing import Any

from .ops import AXES, LAYOUT, Op, REDUCTIONS


class Node:
    __slots__ = ("op", "src", "arg", "shape", "_hash")

    def __init__(self, op, src=(), arg=None, shape=()):
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "src", tuple(src))
        object.__setattr__(self, "arg", arg)
        object.__setattr__(self, "shape", tuple(shape))
        object.__setattr__(self, "_hash", hash((op, self.src, _hashable(arg), self.shape)))

    def __setattr__(self, *_):
        raise AttributeError("Node is immutable; build a new one with .replace()")

    def __hash__(self):
        return self._hash

    def __eq__(self, other):
        if self is other:
            return True
        return (isinstance(other, Node) and self._hash == other._hash and self.op is other.op
                and self.arg == other.arg and self.shape == other.shape and self.src == other.src)

    def replace(self, **kw):
        d = {"op": self.op, "src": self.src, "arg": self.arg, "shape": self.shape}
        d.update(kw)
        return Node(**d)

    def __repr__(self):
        return f"Node({self.op.name}, {describe(self)!r}, shape={self.shape})"


def fingerprint(node, _memo={}):
    """A process-stable structural digest of a node (hash() of strings is randomised per
    process, so canonical orders and on-disk cache keys use this instead)."""
    key = id(node)
    hit = _memo.get(key)
    if hit is not None and hit[0] is node:
        return hit[1]
    import hashlib
    arg = fingerprint(node.arg) if node.op is Op.TOPO else repr(node.arg)
    text = f"{node.op.value}({','.join(fingerprint(s) for s in node.src)};{arg};{node.shape})"
    digest = hashlib.sha1(text.encode()).hexdigest()[:16]
    _memo[key] = (node, digest)
    return digest


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

    def visit(n):
        if n in seen:
            return
        seen.add(n)
        for s in n.src:
            visit(s)
        if into_bodies and n.op is Op.TOPO:
            visit(n.arg)
        order.append(n)
    for r in roots:
        visit(r)
    return order


def accum_axes(batched):
    return frozenset(AXES if batched else AXES[1:])
