"""The Program evaluator: runs a lowered `Program` (evt_core/program.py) on NumPy inputs.

This is the executable form of the Program contract, the same straight-line SSA list every
backend compiles, evaluated over the whole (L, M, N) frame at once instead of per element:

  * every value is a float32 array broadcastable to (L, M, N) (extent 1 on the axes it does
    not vary along), so per-element semantics and whole-frame semantics coincide;
  * a LOAD reads the bound array through the FRAME STRIDES `evt_core.bind` computed for it (the
    strides a backend receives), never through the tree's layout nodes, so a wrong view or a
    wrong role in lowering or binding shows up here;
  * elementwise ops and reductions call the op table (evt_core.tree.ops) and nothing else;
  * a STORE rounds to nearest even and writes through the output's frame strides; on an axis
    the output does not span (frame stride 0) only coordinate 0 is written;
  * a REDUCE combines over `over` from the op's identity in fp32 and rounds once.
"""
import numpy as np

from ..bind import bind, numpy_alloc
from ..dtypes import round_to
from ..errors import UnsupportedError
from ..tree.ops import AXES, ELEMENTWISE, Op, REDUCTIONS
from .memory import accumulate
from .reference import to_numpy


def evaluate_program(program, A, B, inputs):
    """Evaluate `program` on A, B and the named `inputs` (NumPy, or any array `to_numpy`
    copies to the host); returns {name: np.ndarray} in `program.result_names` order. Binding
    (shape, dtype and name checks, output allocation) is `evt_core.bind.bind`, exactly as for
    a backend."""
    A, B = to_numpy(A), to_numpy(B)
    inputs = {k: to_numpy(v) if hasattr(v, "shape") else v for k, v in inputs.items()}
    bound = bind(program, A, B, inputs, numpy_alloc)
    frame = (bound.L, bound.M, bound.N)
    acc = accumulate(A, B, frame)
    values = []
    for ins in program.instrs:
        values.append(_step(program, bound, frame, acc, ins, values))
    return bound.result


def _step(program, bound, frame, acc, ins, values):
    """The value of one instruction (None for STORE: nothing reads a store's SSA slot)."""
    op = ins.op
    if op is Op.ACCUM:
        return acc
    if op is Op.LOAD:
        t = bound.inputs[ins.arg]
        return frame_view(t.array, t.strides, frame).astype(np.float32)
    if op is Op.SCALAR:
        return np.float32(bound.scalars[ins.arg])
    if op is Op.CONST:
        return np.float32(ins.arg)
    args = [values[a] for a in ins.args]
    if op in ELEMENTWISE:
        return ELEMENTWISE[op].fn(*args)
    if op is Op.STORE:
        t = bound.outputs[ins.arg]
        _write(t, args[0], frame, program.outputs[ins.arg].dtype)
        return None
    if op in REDUCTIONS:
        red = program.reductions[ins.arg]
        x = np.broadcast_to(np.asarray(args[0], np.float32), frame)
        axes = tuple(AXES.index(a) for a in sorted(red.over))
        _write(bound.reductions[ins.arg], REDUCTIONS[op].fn(x, axes), frame, red.operand.dtype)
        return None
    raise UnsupportedError(f"the Program evaluator has no rule for {op.value}")


def frame_view(array, strides, frame):
    """The (L, M, N) view of `array` through element frame strides: extent 1 where the stride
    is 0 (the array does not span that axis, or the problem extent is 1), so a value keeps the
    smallest shape that broadcasts to the frame."""
    shape = tuple(e if s else 1 for e, s in zip(frame, strides))
    item = array.dtype.itemsize
    return np.lib.stride_tricks.as_strided(array, shape, tuple(s * item for s in strides),
                                           writeable=array.flags.writeable)


def _write(tensor, value, frame, dtype):
    """Round `value` to `dtype` and write it through the tensor's frame strides. A frame
    stride of 0 means the output holds coordinate 0 of that axis only."""
    target = frame_view(tensor.array, tensor.strides, frame)
    value = np.broadcast_to(np.asarray(value, np.float32), frame)
    value = value[tuple(slice(0, e) for e in target.shape)]
    target[...] = round_to(value, dtype)
