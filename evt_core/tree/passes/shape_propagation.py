"""Shape and dtype propagation with broadcast-role classification.

Invariant established: every node's `shape` is the one `infer_shape` gives from its operands;
every value fits the problem frame (each extent is 1 or the problem's); and, once no layout node
is left, every LOAD and STORE operand has its role: `dims` (which problem axis each user
dimension runs along, or 1 for a broadcast dimension) and a view ending in ("place", ...)
into the rank-3 (L, M, N) frame. Roles, not extents, are what a tree is specialised on.
"""
from dataclasses import replace

from ...errors import ShapeError
from ..ir import accum_axes, describe
from ..ops import AXES, ELEMENTWISE, LAYOUT, Op, REDUCTIONS
from ..shapes import fits_problem, infer_shape
from .rewrite import drive, memoised, rewrite


def propagate_shapes(tree):
    has_layout = any(n.op in LAYOUT for n in tree.nodes())

    def fix(node):
        if node.op in ELEMENTWISE or node.op in LAYOUT or node.op in REDUCTIONS:
            node = node.replace(shape=infer_shape(node.op, node.src, node.arg, tree.problem))
        if not has_layout:
            _check_fits(node, tree)
            if node.op is Op.LOAD and not node.arg.dims:
                node = node.replace(arg=_input_role(node, tree))
            elif node.op is Op.STORE and not node.arg.dims:
                node = node.replace(arg=_output_role(node, tree, axes_of))
        return node

    axes_of = value_axes(tree.batched)
    out = rewrite(tree, fix)
    specialised = any(n.op in (Op.LOAD, Op.STORE) and any(k in ("reshape", "broadcast") for k, _ in n.arg.view)
                      for n in out.nodes())
    return out.replace(specialised=specialised or tree.specialised)


def value_axes(batched):
    """node -> frozenset of the problem axes the value varies along (structural, not extents)."""
    @memoised
    def axes(n):                           # a recursive generator: drive runs it without recursion
        if n.op is Op.ACCUM:
            return accum_axes(batched)
        if n.op is Op.LOAD:
            frame = (1,) * (3 - len(n.shape)) + tuple(n.shape)
            return frozenset(a for a, e in zip(AXES, frame) if e != 1)
        if n.op in REDUCTIONS:
            return (yield axes(n.src[0])) - n.arg
        out = frozenset()
        for s in n.src:
            out = out.union((yield axes(s)))
        return out
    return lambda n: drive(axes(n))


def _check_fits(node, tree):
    if node.op in (Op.STORE, Op.SINK, Op.TOPO):
        return
    if not fits_problem(node.shape, tree.problem):
        what = f"input {node.arg.name!r}" if node.op is Op.LOAD else describe(node)
        raise ShapeError(f"{what} has shape {node.shape}, which does not fit the problem (L, M, N) = "
                         f"{tree.problem} given by accum: each extent must be 1 or the problem's")


def _right_aligned(rank):
    return tuple(range(3 - rank, 3))


def _track(view, rank):
    """For each user dim, its position after the permute/pad steps of `view` (None if a reshape
    or broadcast mixes dims)."""
    pos = list(range(rank))
    for kind, arg in view:
        if kind == "pad":
            pos = [p + arg for p in pos]
        elif kind == "permute":
            inv = {old: new for new, old in enumerate(arg)}
            pos = [inv[p] for p in pos]
        else:
            return None
    return pos


def _input_role(node, tree):
    op = node.arg
    rank = len(node.shape)
    positions = _right_aligned(rank)
    view = op.view + (("place", positions),)
    track = _track(op.view, len(op.example_shape))
    if track is None:                      # reshaped: specialised on literal extents
        dims = tuple(op.example_shape)
    else:
        dims = tuple(AXES[positions[p]] if e != 1 else 1 for p, e in zip(track, op.example_shape))
        dims = tuple(d if d != "L" or tree.batched else 1 for d in dims)
    return replace(op, dims=dims, view=view)


def _output_role(node, tree, axes_of):
    op, value = node.arg, node.src[0]
    if op.view and op.view[-1][0] == "place":          # reductions: placed by the tracer
        positions, view = op.view[-1][1], op.view
        track = list(range(len(op.example_shape)))
        over = value.arg if value.op in REDUCTIONS else frozenset()
        frame = [AXES[positions[p]] for p in track]
        dims = tuple(1 if a in over or (a == "L" and not tree.batched) else a for a in frame)
        return replace(op, dims=dims)
    inner = _shape_after(op.example_shape, op.view)
    positions = _right_aligned(len(inner))
    view = op.view + (("place", positions),)
    track = _track(op.view, len(op.example_shape))
    if track is None:
        dims = tuple(op.example_shape)
        spans = {AXES[positions[i]] for i, e in enumerate(inner) if e == tree.problem[positions[i]] and e != 1}
    else:
        frame_ext = {positions[p]: e for p, e in zip(track, op.example_shape)}
        dims = tuple(AXES[positions[p]] if e == tree.problem[positions[p]] and (tree.batched or positions[p])
                     else 1 for p, e in zip(track, op.example_shape))
        spans = {AXES[p] for p, e in frame_ext.items() if e == tree.problem[p] and (tree.batched or p)}
    if not fits_problem(inner, tree.problem):
        raise ShapeError(f"output {op.name!r} has shape {op.example_shape}, which does not fit the problem "
                         f"(L, M, N) = {tree.problem}")
    extra = axes_of(value) - spans
    if extra:
        ax = "".join(sorted(extra))
        raise ShapeError(f"output {op.name!r} has shape {op.example_shape} but its value {describe(value)} varies "
                         f"along {ax}; reduce it (e.g. ops.sum(..., over={tuple(sorted(extra))!r})) or give "
                         f"{op.name!r} a shape that spans {ax}")
    return replace(op, dims=dims, view=view)


def _shape_after(shape, view):
    from ...bind import view_strides
    return view_strides(shape, (0,) * len(shape), view)[0] if view else tuple(shape)
