"""The tree walker: the semantics evaluated directly on a Tree.

`evt_core.interpret` evaluates the lowered Program instead (program.py); this walker exists for
trees in the middle of the pipeline and as the independent side of the property that checks
lowering (properties/test_program_eval.py). It evaluates a tree at ANY stage of the pipeline
(layout nodes, TOPO bodies and all) over the whole (L, M, N) problem at once, not per tile: the
accumulator is A @ B in fp32, every load is converted to fp32, every op runs in fp32 through
the op table, reductions accumulate in fp32 from their identity and round once, and a store
rounds to its dtype (nearest even) and returns its input. Backends are correct when they agree
with it; tile-level execution may differ only by floating-point reassociation.
"""
import numpy as np

from ..bind import bind, numpy_alloc, problem_shape
from ..dtypes import DTYPES, round_to
from ..errors import ShapeError, UnsupportedError
from ..tree.ir import postorder
from ..tree.ops import AXES, ELEMENTWISE, Op, REDUCTIONS


def interpret(tree, A, B, **inputs):
    """Evaluate `tree` on A, B and the named inputs; returns {output name: np.ndarray}."""
    A, B = to_numpy(A), to_numpy(B)
    inputs = {k: to_numpy(v) if hasattr(v, "shape") else v for k, v in inputs.items()}
    if tree.program is not None:
        bound = bind(tree.program, A, B, inputs, numpy_alloc)
        outputs, (L, M, N) = bound.result, (bound.L, bound.M, bound.N)
    else:   # a tree in the middle of the pipeline: only at the traced problem
        (L, M, N, _), *_ = problem_shape(_program_like(tree), A, B)
        outputs = {}
    acc = np.matmul(A.astype(np.float32), B.astype(np.float32)).astype(np.float32)
    if tree.batched and acc.ndim == 2:
        acc = acc[None]
    env = _Env(tree, acc, inputs, outputs, (L, M, N))
    top = {}
    for r in tree.roots:
        env.eval(r, (), top)
    return {name: outputs[name] for name in tree.result_names}


class _Env:
    def __init__(self, tree, acc, inputs, outputs, problem):
        self.tree, self.acc, self.inputs, self.outputs, self.problem = tree, acc, inputs, outputs, problem

    def eval(self, n, args, memo):
        """Value of `n` with TOPO placeholders bound to `args`; `memo` belongs to one
        evaluation of one body (the same body node means other values under other args)."""
        if n not in memo:
            # operands first, in post-order (a deep chain must not recurse once per level);
            # _eval's own calls for operands are then memo hits, a TOPO body a fresh walk
            for m in postorder((n,)):
                if m not in memo:
                    memo[m] = self._eval(m, args, memo)
        return memo[n]

    def _eval(self, n, args, memo):
        op = n.op
        if op is Op.ACCUM:
            return self.acc
        if op is Op.LOAD:
            x = np.asarray(self.inputs[n.arg.name])
            return apply_view(x, n.arg.view).astype(np.float32)
        if op is Op.SCALAR:
            return np.float32(self.inputs[n.arg])
        if op is Op.CONST:
            return np.float32(n.arg)
        if op is Op.ARG:
            return args[n.arg]
        if op is Op.TOPO:
            bound = tuple(self.eval(s, args, memo) for s in n.src)
            return self.eval(n.arg, bound, {})
        vals = [self.eval(s, args, memo) for s in n.src]
        if op in ELEMENTWISE:
            return ELEMENTWISE[op].fn(*vals)
        if op is Op.PERMUTE:
            return np.transpose(vals[0], n.arg)
        if op is Op.RESHAPE:
            return np.reshape(vals[0], n.arg)
        if op in REDUCTIONS:
            x = vals[0].reshape((1,) * (3 - vals[0].ndim) + vals[0].shape)
            x = np.broadcast_to(x, self.problem)
            return REDUCTIONS[op].fn(x, tuple(AXES.index(a) for a in sorted(n.arg)))
        if op is Op.STORE:
            self._store(n.arg, vals[0])
            return vals[0]
        if op is Op.SINK:
            return None
        raise UnsupportedError(f"the interpreter has no rule for {op.value}", n)

    def _store(self, operand, value):
        out = self.outputs.get(operand.name)
        if out is None:     # mid-pipeline tree: allocate the traced example's shape
            out = self.outputs[operand.name] = np.empty(operand.example_shape, DTYPES[operand.dtype])
        view = apply_view(out, operand.view)
        if not np.shares_memory(view, out) and view.size:
            raise UnsupportedError(f"output {operand.name!r}: its layout {operand.view} cannot be written "
                                   "through a view; no node kind expresses it")
        value = np.asarray(value, np.float32)
        rank = max(value.ndim, view.ndim)
        value = value.reshape((1,) * (rank - value.ndim) + value.shape)
        target = view.reshape((1,) * (rank - view.ndim) + view.shape)
        # an output that does not span an axis holds the value at coordinate 0 of it
        value = value[tuple(slice(0, 1) if t == 1 else slice(None) for t in target.shape)]
        try:
            target[...] = round_to(np.broadcast_to(value, target.shape), operand.dtype)
        except ValueError:
            raise ShapeError(f"output {operand.name!r} of shape {out.shape} cannot hold a value of shape "
                             f"{value.shape}") from None


def to_numpy(x):
    """Host copy of a NumPy, CuPy, Numba device or PyTorch array (the reference runs on the
    host whatever the caller's arrays are)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "copy_to_host"):                      # numba device array
        return x.copy_to_host()
    if hasattr(x, "get") and hasattr(x, "__cuda_array_interface__"):   # cupy
        return x.get()
    if hasattr(x, "detach") and hasattr(x, "cpu"):      # torch (bf16 through float32)
        t = x.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            import ml_dtypes
            return t.float().numpy().astype(ml_dtypes.bfloat16)
        return t.numpy()
    return np.asarray(x)


def apply_view(x, view):
    """Apply layout steps (see Operand.view) to a NumPy array, as views where possible."""
    for kind, arg in view:
        if kind == "pad":
            x = x.reshape((1,) * arg + x.shape)
        elif kind == "broadcast":
            x = np.broadcast_to(x, arg)
        elif kind == "permute":
            x = np.transpose(x, arg)
        elif kind == "reshape":
            x = x.reshape(arg)
        elif kind == "place":
            frame = [1, 1, 1]
            for d, p in enumerate(arg):
                frame[p] = x.shape[d]
            x = x.reshape(frame)
    return x


class _program_like:
    """Enough of a Program for problem_shape() on a tree without one."""

    def __init__(self, tree):
        self.batched, self.specialised, self.problem = tree.batched, True, tree.problem
