"""The IR verifier: structural rules every tree satisfies after every pass. The pipeline runs
it between passes when EVT_VERIFY=1 (on in the test suite); a failure names the pass that
broke the invariant and the offending node."""
from ..errors import EvtError
from .ir import describe
from .ops import ELEMENTWISE, LAYOUT, LEAVES, Op, REDUCTIONS


class TreeValidationError(EvtError):
    """A pass produced an ill-formed tree: a bug in that pass, not in the caller's epilogue."""

    def __init__(self, message, node=None, pass_name=""):
        self.node, self.pass_name = node, pass_name
        super().__init__(f"after pass {pass_name or '?'}: {message}" + (f" at {describe(node)}" if node else ""))


def verify(tree, pass_name=""):
    def fail(msg, node=None):
        raise TreeValidationError(msg, node, pass_name)

    names = []
    for n in tree.nodes():
        if n.op in ELEMENTWISE and len(n.src) != ELEMENTWISE[n.op].arity:
            fail(f"{n.op.value} takes {ELEMENTWISE[n.op].arity} operands, has {len(n.src)}", n)
        if n.op in LEAVES and n.src:
            fail("a leaf has operands", n)
        if n.op in REDUCTIONS and not (isinstance(n.arg, frozenset) and n.arg):
            fail("a reduction needs a non-empty frozenset of axes", n)
        if n.op in LAYOUT and len(n.src) != 1:
            fail("a layout op takes one operand", n)
        if n.op is Op.STORE:
            names.append(n.arg.name)
            if len(n.src) != 1:
                fail("a store takes one operand", n)
        if any(s.op in REDUCTIONS for s in n.src) and n.op is not Op.STORE:
            fail("a reduction result may only be stored", n)
    from .ir import postorder
    for n in postorder(tree.roots):          # outside TOPO bodies no ARG is bound
        if n.op is Op.ARG:
            fail("an ARG placeholder outside any TOPO body", n)
    missing = set(tree.result_names) - set(names)
    if missing:
        fail(f"outputs {sorted(missing)} are never stored")
    return tree


def verify_tree_shape(tree, pass_name="dag_to_tree"):
    """Postcondition of dag_to_tree: one root; outside TOPO bodies every node has one consumer."""
    if len(tree.roots) != 1:
        raise TreeValidationError(f"{len(tree.roots)} roots, expected 1", None, pass_name)
    seen = {}
    # depth-first from an explicit stack (a deep chain must not recurse once per level), in the
    # order of the recursive walk, so the same node is named first
    stack = [iter(tree.roots[0].src)]
    while stack:
        s = next(stack[-1], None)
        if s is None:
            stack.pop()
            continue
        seen[s] = seen.get(s, 0) + 1
        if seen[s] > 1:
            raise TreeValidationError("node has several consumers", s, pass_name)
        stack.append(iter(s.src))
    return tree
