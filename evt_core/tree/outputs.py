"""Outputs: turning the returned values into STORE roots, each with the view that places the
user's output array into the (L, M, N) frame. A reduction output's example decides nothing
about the reduction (its axes come from `over=`); the example must be the problem shape with
each reduced axis removed or kept as 1, and anything else is a ShapeError naming the output."""
import itertools
import numbers

import numpy as np

from ..errors import ShapeError, TraceError
from ..program import Operand
from .ir import Node, Tree, describe
from .ops import AXES, Op, REDUCTIONS
from .trace import Value, _example_of, fp32_constant, stride_order, trace_function


def make_tree(fn, examples):
    params, problem, batched, returned = trace_function(fn, examples)
    roots = []
    for name, value in returned.items():
        if name in params and name != "accum":
            raise TraceError(f"output {name!r} has the same name as an input parameter; rename one of them")
        if name not in examples:
            raise TraceError(f"no example for output {name!r}; add examples[{name!r}] = an array or TensorSpec "
                             "giving its shape and dtype")
        if isinstance(examples[name], numbers.Real):
            raise TraceError(f"output {name!r} has a float example; outputs need an array or TensorSpec")
        roots.append(store(name, _value_node(name, value), examples[name], problem, batched))
    _refuse_unknown_examples(examples, params, returned)
    return Tree(tuple(roots), tuple(params), problem, batched, tuple(returned))


def _refuse_unknown_examples(examples, params, returned):
    """An example no parameter or output uses is almost always a typo (`bais` for `bias`, an
    output renamed in the function but not in the dict); ignoring it would hide that."""
    import difflib
    known = list(params) + [n for n in returned if n not in params]
    for key in examples:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TraceError(f"example {key!r} is neither a parameter nor a returned output of the epilogue"
                             f"{hint}; parameters: {list(params)}, outputs: {list(returned)}. Remove it or "
                             "fix the name")


def _value_node(name, value):
    if isinstance(value, Value):
        return value.node
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return Node(Op.CONST, arg=fp32_constant(value, f"output {name!r}"))
    raise TraceError(f"output {name!r} is a {type(value).__name__}; return traced values (or numbers), "
                     "not containers or other objects")


def store(name, value, example, problem, batched):
    shape, dt, strides = _example_of(name, example)
    operand = Operand(name, dt, dims=(), view=(), order=stride_order(shape, strides), example_shape=shape)
    if value.op in REDUCTIONS:
        positions = reduction_positions(name, shape, value.arg, problem, batched)
        operand = Operand(name, dt, dims=(), view=(("place", positions),), order=operand.order,
                          example_shape=shape)
    else:
        try:
            fits = tuple(np.broadcast_shapes(value.shape, shape)) == shape
        except ValueError:
            fits = False
        if not fits:
            raise ShapeError(f"output {name!r} has shape {shape} but its value {describe(value)} has shape "
                             f"{value.shape}; give {name!r} the value's shape, or reduce the extra axes with "
                             "ops.sum/amax/amin/mean(..., over=...)")
    return Node(Op.STORE, (value,), operand, shape)


def reduction_positions(name, shape, over, problem, batched):
    """Frame positions of the user's dims for a reduction output, or ShapeError listing the
    shapes that would fit."""
    if "L" in over and not batched:
        raise ShapeError(f"reduction output {name!r} reduces over L, but accum is rank 2 (no batch axis); "
                         "remove 'L' from over= or trace with a (L, M, N) accum")
    frame_axes = AXES if batched else AXES[1:]
    reduced = [a for a in frame_axes if a in over]
    options = {}
    for drop in itertools.product((True, False), repeat=len(reduced)):
        dropped = {a for a, d in zip(reduced, drop) if d}
        axes = [a for a in frame_axes if a not in dropped]
        ext = tuple(1 if a in over else problem[AXES.index(a)] for a in axes)
        options.setdefault(ext, tuple(AXES.index(a) for a in axes))
    if tuple(shape) not in options:
        allowed = " or ".join(str(s) for s in options)
        hint = ""
        if batched and "L" not in over and len(shape) < len(next(iter(options))):
            hint = f"; to reduce over the batch as well, use over={tuple(sorted(over | {'L'}))!r}"
        raise ShapeError(f"reduction output {name!r} has shape {tuple(shape)} but reducing over "
                         f"{''.join(sorted(over))} gives {allowed}{hint}")
    return options[tuple(shape)]
