"""DAG to tree (CUTLASS's PassDAG2Tree, with the merge point fixed).

Invariant established: the tree has a single root (a SINK joining the outputs) and every node
outside TOPO bodies has exactly one consumer. A value used several times, together with
everything between it and the point where its uses merge again, becomes one TOPO node (a
topological visitor, evaluated once per fragment). The merge point is the value's immediate
POST-DOMINATOR, not the first node reachable from every use: the latter can be bypassed (the
dGELU case in the design notes), which loses an operand. Cost: O(shared nodes * N^2) on N
nodes, fine for epilogue-sized trees.
"""
from ..ir import Node, postorder
from ..ops import Op
from .rewrite import drive


def dag_to_tree(tree):
    root = tree.roots[0] if len(tree.roots) == 1 and tree.roots[0].op in (Op.SINK, Op.TOPO) \
        else Node(Op.SINK, tree.roots, shape=())
    while True:
        order = postorder((root,))
        users = _users(order)
        shared = next((n for n in order if len(users[n]) > 1), None)
        if shared is None:
            return tree.replace(roots=(root,))
        root = _collapse(root, shared, order, users)


def _users(order):
    users = {n: [] for n in order}
    for n in order:
        for s in n.src:
            users[s].append(n)
    return users


def _postdominators(order, users):
    index = {n: i for i, n in enumerate(order)}
    pdom = {}
    for n in reversed(order):
        sets = [pdom[u] for u in users[n]]
        common = set.intersection(*sets) if sets else set()
        pdom[n] = common | {n}
    return pdom, index


def _collapse(root, v, order, users):
    pdom, index = _postdominators(order, users)
    merge = min(pdom[v] - {v}, key=index.__getitem__)      # the immediate post-dominator
    forward = _reach(v, lambda n: users[n])
    backward = _reach(merge, lambda n: n.src)
    region = forward & backward
    externals = []
    memo = {}

    def body(n):                           # a recursive generator: drive runs it without recursion
        if n not in region:
            if n not in externals:
                externals.append(n)
            return Node(Op.ARG, arg=externals.index(n), shape=n.shape)
        if n not in memo:
            src = []
            for s in n.src:
                src.append((yield body(s)))
            memo[n] = n.replace(src=tuple(src))
        return memo[n]
    fused = drive(body(merge))
    topo = Node(Op.TOPO, tuple(externals), fused, merge.shape)
    if merge is root:
        return topo
    return _replace(root, merge, topo)


def _reach(start, step):
    seen, stack = {start}, [start]
    while stack:
        for m in step(stack.pop()):
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return seen


def _replace(root, old, new):
    memo = {}

    def visit(n):                          # a recursive generator: drive runs it without recursion
        if n == old:
            return new
        if n not in memo:
            src = []
            for s in n.src:
                src.append((yield visit(s)))
            memo[n] = n.replace(src=tuple(src)) if n.src else n
        return memo[n]
    return drive(visit(root))
