"""Layout elimination: PERMUTE and RESHAPE disappear from the compute tree.

Invariant established: no layout node remains; every layout op became a step of a LOAD's view
(for values that do not depend on accum: the op is pushed down to the loads it reads) or of a
STORE's view (for values that depend on accum: the op is pulled up to the store, and the
output array is viewed through its inverse). The affected tensors simply get other strides,
as in CUTLASS's layout pass. A layout that would need the accumulator itself in another
order (permute(accum) + accum, or a reduction of a permuted accumulator) is refused.
"""
import numpy as np

from ...errors import UnsupportedError
from ..ir import describe
from ..ops import ELEMENTWISE, LAYOUT, Op, REDUCTIONS
from .rewrite import drive, memoised, rewrite


def eliminate_layout(tree):
    depends = _accum_dependence()
    # down and hoist are recursive generators (`x = yield down(...)`) that `drive` runs on an
    # explicit stack, so a deep chain does not exhaust the recursion limit; both are memoised
    # (unmemoised, hoist walked a shared value once per use: exponential in x = x * x chains)

    @memoised
    def down(node, steps):
        """`node` (accum-free) with layout `steps` applied, as a layout-free node."""
        if node.op in LAYOUT:
            return (yield down(node.src[0], ((node.op, node.arg),) + steps))
        if not steps:
            if node.op in ELEMENTWISE or node.op in REDUCTIONS:
                src = []
                for s in node.src:
                    src.append((yield down(s, ())))
                return node.replace(src=tuple(src))
            return node
        if node.op in (Op.CONST, Op.SCALAR):
            return node                      # a scalar is the same in every layout
        shape = _apply_shape(node.shape, steps)
        if node.op is Op.LOAD:
            view = node.arg.view + tuple((k.value, a) for k, a in steps)
            return node.replace(arg=_with_view(node.arg, view), shape=shape)
        if node.op in ELEMENTWISE:
            src = []
            for s in node.src:
                src.append((yield down(_fit(s, node.shape, steps), steps)))
            return node.replace(src=tuple(src), shape=shape)
        raise UnsupportedError(f"{describe(node)}: a layout op applied to a reduction result cannot be expressed; "
                               "reduce the laid-out value instead", node)

    @memoised
    def hoist(node):
        """(layout-free node, steps) with node == steps applied to it; accum-dependent nodes only."""
        if not depends(node):
            return (yield down(node, ())), ()
        if node.op is Op.ACCUM:
            return node, ()
        if node.op in LAYOUT:
            inner, steps = yield hoist(node.src[0])
            return inner, _simplify(steps + ((node.op, node.arg, node.src[0].shape),))
        if node.op in REDUCTIONS:
            inner, steps = yield hoist(node.src[0])
            if steps:
                raise UnsupportedError(f"{describe(node)} reduces a permuted/reshaped accumulator value; reduce "
                                       "before the layout op (reductions name problem axes L, M, N)", node)
            return node.replace(src=(inner,)), ()
        parts = []
        for s in node.src:
            parts.append((yield hoist(s)) if depends(s) else None)
        steps = {p[1] for p in parts if p is not None}
        if len(steps) > 1:
            raise UnsupportedError(f"{describe(node)} combines accumulator values in different layouts "
                                   f"({' vs '.join(_layout_text(s, tree.problem) for s in steps)}); no node kind "
                                   "can read the accumulator with two sets of strides", node)
        (steps,) = steps
        inv = _inverse(steps)
        src = []
        for s, p in zip(node.src, parts):
            # an accum-free operand meets the accumulator in its own frame: undo the layout on it
            src.append(p[0] if p is not None else (yield down(_fit(s, node.shape, inv), inv)))
        inner_shape = _apply_shape(node.shape, inv)
        return node.replace(src=tuple(src), shape=inner_shape), steps

    def fix(node):
        if node.op is not Op.STORE:
            return node
        inner, steps = drive(hoist(node.src[0]))
        if not steps:
            return node.replace(src=(inner,))
        view = tuple((k.value, a) for k, a in _inverse(steps)) + node.arg.view
        arg = _with_view(node.arg, view)
        _check_writable(node, arg)
        return node.replace(src=(inner,), arg=arg)

    return rewrite(tree, fix)


def _simplify(steps):
    """The same layout with consecutive reshapes merged, consecutive permutes composed and
    identities dropped, so a view that a later view undoes (torch's graphs are full of
    (B*S, H) -> (B, S, H) -> (B*S, H)) leaves the accumulator in its own layout."""
    out = []
    for op, arg, src in steps:
        arg = tuple(_apply_shape(src, ((op, arg),))) if op is Op.RESHAPE else tuple(arg)
        if out and out[-1][0] is op:
            prev_arg, prev_src = out.pop()[1:]
            arg, src = (arg, prev_src) if op is Op.RESHAPE else (tuple(prev_arg[i] for i in arg), prev_src)
        identity = tuple(arg) == tuple(src) if op is Op.RESHAPE else tuple(arg) == tuple(range(len(arg)))
        if not identity:
            out.append((op, arg, src))
    return tuple(out)


def _check_writable(node, operand):
    """Refuse, at trace time, an output whose layout no strides of a freshly allocated array
    can express (a head split: reshape, permute, merge), naming it, rather than at the first
    call. Binding allocates in the example's dim order, else row-major (bind._allocate)."""
    from ...bind import output_strides
    shape = tuple(operand.example_shape)
    if not shape or 0 in shape:
        return
    if output_strides(operand, shape) is None:
        raise UnsupportedError(f"{describe(node)}: output {operand.name!r} of shape {shape} is a layout of the "
                               "accumulator that no strides can express (it merges permuted dimensions); "
                               "return the value in the accumulator's layout and reshape it afterwards", node)


def _accum_dependence():
    @memoised
    def walk(node):
        if node.op is Op.ACCUM:
            return True
        for s in node.src:
            if (yield walk(s)):
                return True
        return False
    return lambda node: drive(walk(node))


def _fit(operand, full_shape, steps):
    """Pad a broadcast operand to the rank the steps expect (and stretch it before a reshape)."""
    if not steps or operand.op in (Op.CONST, Op.SCALAR):
        return operand
    pad = len(full_shape) - len(operand.shape)
    out = operand
    if pad:
        out = drive(_pad(out, pad))
    if steps[0][0] is Op.RESHAPE and tuple(out.shape) != tuple(full_shape):
        out = drive(_stretch(out, full_shape))
    return out


def _pad(node, k):
    shape = (1,) * k + tuple(node.shape)
    if node.op is Op.LOAD:
        return node.replace(arg=_with_view(node.arg, node.arg.view + (("pad", k),)), shape=shape)
    src = []
    for s in node.src:                     # a generator run by drive, like down and hoist
        src.append((yield _pad(s, k)) if s.shape else s)
    return node.replace(src=tuple(src), shape=shape)


def _stretch(node, shape):
    if node.op is Op.LOAD:
        return node.replace(arg=_with_view(node.arg, node.arg.view + (("broadcast", tuple(shape)),)), shape=shape)
    if node.op in (Op.CONST, Op.SCALAR):
        return node
    src = []
    for s in node.src:                     # a generator run by drive, like down and hoist
        src.append((yield _stretch(s, shape)))
    return node.replace(src=tuple(src), shape=shape)


def _inverse(steps):
    """Layout steps that undo `steps` (each (op, arg, source shape))."""
    inv = []
    for op, arg, src_shape in reversed(steps):
        if op is Op.PERMUTE:
            inv.append((Op.PERMUTE, tuple(int(i) for i in np.argsort(arg))))
        else:
            inv.append((Op.RESHAPE, tuple(src_shape)))
    return tuple(inv)


def _apply_shape(shape, steps):
    for step in steps:
        op, arg = step[0], step[1]
        if op is Op.PERMUTE:
            shape = tuple(shape[d] for d in arg)
        else:
            known = int(np.prod([e for e in arg if e != -1]))
            total = int(np.prod(shape))
            shape = tuple(total // known if e == -1 else e for e in arg)
    return tuple(shape)


def _layout_text(steps, problem):
    """'permute(1, 0): strides (1, 4)': the layout ops and the element strides they give the
    row-major accumulator they start from ('as computed' for none)."""
    if not steps:
        return "as computed: row-major strides"
    from ...bind import view_strides
    shape = steps[0][2]
    strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))
    got = view_strides(shape, strides, tuple((op.value, arg) for op, arg, _ in steps))
    text = " then ".join(f"{op.value}{arg}" for op, arg, _ in steps)
    return f"{text}: strides {got[1]}" if got else text


def _with_view(operand, view):
    from dataclasses import replace
    return replace(operand, view=view)
