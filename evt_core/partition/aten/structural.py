"""Layout, indexing, reduction and constant ATen ops: one record each (kind, signature, shape
rule, NumPy, tree node). Layout ops become `ops.permute` only at the accumulator's rank, and
reductions `ops.sum/amax/amin/mean` over the named problem axes; the rest never enter a tree."""
from __future__ import annotations

import numpy as np

from evt_core import ops as E

from .. import shapes as S
from ..shapes import dims_of, view_shape
from . import kernels as K
from .record import Kind, Unfusible, op

_E, _R = Kind.ELEMENTWISE, Kind.REDUCTION
_AXES = {2: "MN", 3: "LMN"}
_LAYOUT_ONLY = "a layout change the epilogue cannot express (only permutes of the accumulator's rank)"


def layout_perm(node, rank: int) -> tuple[int, ...]:
    """The permutation a permute/transpose/t node applies, as dims of a rank-`rank` tensor."""
    if node.op == "permute":
        return tuple(d % rank for d in node.attr("dims"))
    dims = list(range(rank))
    i, j = (0, 1) if node.op == "t" else (node.attr("dim0") % rank, node.attr("dim1") % rank)
    dims[i], dims[j] = dims[j], dims[i]
    return tuple(dims)


def _permute_tree(node, a, ctx):
    # at the value's own rank: after a view (a head split, say) that is not the accumulator's
    return E.permute(a[0], layout_perm(node, len(node.shape)))


def _view_tree(node, a, ctx):
    """A view/reshape becomes `ops.reshape` to the node's static shape: the layout pass turns it
    into store strides (on accumulator values) or load strides (on the others), and refuses
    what no strides express (a TraceError/UnsupportedError the caller reports as unfused)."""
    return E.reshape(a[0], tuple(node.shape))


def _reduce_tree(node, a, ctx):
    rank = ctx.rank
    src = getattr(ctx, "graph", None)
    if src is not None and len(src.nodes[node.inputs[0]].shape) != rank:
        return _reduce_in_frame(node, a, ctx, src.nodes[node.inputs[0]].shape)
    if len(node.shape) not in (rank, rank - 1, rank - 2) or rank not in _AXES:
        raise Unfusible(f"{node.name}: {node.op} to rank {len(node.shape)} in a rank-{rank} epilogue")
    over = tuple(_AXES[rank][d] for d in dims_of(node.attr("dim"), rank))
    return getattr(E, node.op)(a[0], over=over)


def _reduce_in_frame(node, a, ctx, shape):
    """A reduction of a value of another rank than the accumulator's: a view of the frame, such
    as LayerNorm's backward summing a (B, S, H) view of the (B*S, H) accumulator over (B, S).
    Reshaped back to the frame it is a reduction over whole problem axes, which the layout pass
    turns into the view's load and store strides. Invariant: only taken when every frame axis
    is either reduced over all of its dims or kept whole, and the result has exactly the kept
    axes' extents (keepdim False), so the frame reduction computes the same values."""
    frame = getattr(ctx, "frame", None)
    groups = _frame_groups(tuple(shape), frame) if frame and ctx.rank in _AXES else None
    why = f"{node.name}: {node.op} of a rank-{len(shape)} value in a rank-{ctx.rank} epilogue"
    if groups is None or node.attr("keepdim"):
        raise Unfusible(why)
    dims = set(dims_of(node.attr("dim"), len(shape)))
    reduced = []
    for j, grp in enumerate(groups):
        hit = {d for d in grp if shape[d] != 1} & dims
        if hit and hit != {d for d in grp if shape[d] != 1}:
            raise Unfusible(f"{why} (it reduces part of frame axis {_AXES[ctx.rank][j]})")
        if hit or (grp and all(d in dims for d in grp)):
            reduced.append(j)
    kept = tuple(frame[j] for j in range(len(frame)) if j not in reduced)
    if not reduced or tuple(node.shape) != kept:
        raise Unfusible(why)
    over = tuple(_AXES[ctx.rank][j] for j in reduced)
    return getattr(E, node.op)(E.reshape(a[0], frame), over=over[0] if len(over) == 1 else over)


def _frame_groups(shape, frame):
    """For each frame axis, the dims of `shape` whose extents multiply into it (consecutive,
    in order; size-1 dims join the axis they follow, or the first), or None when `shape` is not
    such a split of `frame`."""
    groups, cur, prod, j = [], [], 1, 0
    for d, n in enumerate(shape):
        if j == len(frame):
            if n != 1:
                return None
            groups[-1].append(d)
            continue
        cur.append(d)
        prod *= n
        if prod == frame[j]:
            groups.append(cur)
            cur, prod, j = [], 1, j + 1
        elif prod > frame[j]:
            return None
    return groups if j == len(frame) and not cur else None


op("permute", _E, "self dims:", S.permute, lambda self, dims: np.transpose(self, dims), _permute_tree)
op("transpose", _E, "self dim0: dim1:", S.transpose, lambda self, dim0, dim1: np.swapaxes(self, dim0, dim1),
   _permute_tree)
op("t", _E, "self", S.t, lambda self: self.T, _permute_tree)
op("view", _E, "self size:", S.view, lambda self, size: self.reshape(view_shape(self.shape, size)),
   _view_tree, aliases=("reshape", "_unsafe_view"))
op("expand", _E, "self size:", S.expand, K.expand, _LAYOUT_ONLY)
# Adding or removing size-1 dims keeps every element's row-major position: a view.
op("unsqueeze", _E, "self dim:", S.unsqueeze, lambda self, dim: np.expand_dims(self, dim % (self.ndim + 1)),
   _view_tree)
op("squeeze", _E, "self dim:", S.squeeze, K.squeeze, _view_tree, defaults={"dim": None})
op("select", _E, "self dim: index:", S.select, lambda self, dim, index: np.take(self, index, axis=dim),
   "indexing has no epilogue op")
op("select_backward", _E, "grad_output input_sizes: dim: index:", S.select_backward, K.select_backward,
   "scatter has no epilogue op")
op("getitem", _E, "self index:", S.getitem, lambda self, index: self[index],
   "a tuple element: the producer is an anchor or opaque op, never an epilogue node")
op("one_hot", _E, "self num_classes:", S.one_hot,
   lambda self, num_classes: (self[..., None] == np.arange(num_classes)).astype(np.int64),
   "integer values are not epilogue values", defaults={"num_classes": -1})
for _name, _np in (("sum", np.sum), ("amax", np.max), ("amin", np.min), ("mean", np.mean)):
    op(_name, _R, "self dim: keepdim:", S.reduce_sum if _name == "sum" else S.reduce, K.reduce_with(_np),
       _reduce_tree, defaults={"dim": None, "keepdim": False})
op("full", Kind.CONST, "size: fill_value: dtype:", S.full,
   lambda size, fill_value, dtype: np.full(size, fill_value),
   "constants enter the tree as Python numbers (uniform) or loads")
