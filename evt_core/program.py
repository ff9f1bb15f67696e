"""The lowered epilogue: what a backend compiles.

A traced tree, after the pass pipeline, is flattened into a `Program`: a straight-line SSA list
of instructions in topological order, evaluated once per accumulator element (l, m, n). Layout
ops are gone (they became each operand's `view`), shared values are plain SSA reuse, and every
tensor's role is explicit in `spans`. Backends never look at the tree itself, and neither does
the reference: `evt_core.interpret` (and the "numpy" backend) run this Program through
`evt_core.interpreter.evaluate_program`, so "matches the reference" means "same Program, same
semantics". The tree walker (evt_core/interpreter/reference.py) evaluates trees at any pipeline
stage; a property (properties/test_program_eval.py) checks that both agree bit for bit, which
is what checks lowering.

Semantics of one Program (the contract every backend implements):
  * ACCUM is A@B at (l, m, n), accumulated in fp32.
  * LOAD reads `inputs[arg]` at (l, m, n) through its frame strides (0 on axes it does not span)
    and converts to fp32. SCALAR is the run-time fp32 scalar `scalars[arg]`. CONST is `arg`.
  * Elementwise ops compute in fp32 exactly as `evt_core.tree.ops.ELEMENTWISE[op].fn`.
  * STORE writes its operand, rounded to nearest even, to `outputs[arg]` at (l, m, n); an
    output that does not span an axis is written only at coordinate 0 of that axis (the value is
    constant along it by construction).
  * REDUCE combines its operand into `reductions[arg]` over the axes in `over`, in fp32, starting
    from the op's identity (the kernel initialises the output; callers never pre-fill it), and
    rounds once at the end; MEAN divides the fp32 sum by the number of reduced elements.
"""
import hashlib
from dataclasses import dataclass, field
from typing import Any

from .tree.ops import AXES, Op


@dataclass(frozen=True)
class Operand:
    """A tensor the kernel reads or writes, as the user passes or receives it.

    dims: for each dimension of the user's array, the problem axis it runs along ("L", "M",
      "N"), or an int: 1 for a broadcast dimension, or a literal extent a reshape fixed.
    view: layout steps from the user's array to the rank-3 (L, M, N) problem frame (see
      bind.view_strides): ("pad", k) prepends k unit dims, ("broadcast", shape) stretches unit
      dims, ("permute", dims), ("reshape", shape), and last ("place", positions), which puts
      dim i at frame position positions[i] (other frame dims are unit).
    example_shape: the traced example's shape (for messages).
    order: the user array's dims from outermost to innermost stride in the traced example;
      outputs are allocated in this order, so a column-major example gives a column-major
      output.
    """
    name: str
    dtype: str
    dims: tuple
    view: tuple = ()
    order: tuple = ()
    example_shape: tuple = ()

    @property
    def rank(self):
        return len(self.dims)


@dataclass(frozen=True)
class Reduction:
    """A reduction output: `op` (Op.SUM/AMAX/AMIN/MEAN) of its operand over the problem axes
    in `over`. `operand.dims` has no entry for the reduced axes (they were dropped or kept as
    1 in the user's example)."""
    operand: Operand
    op: Op
    over: frozenset

    @property
    def name(self):
        return self.operand.name


@dataclass(frozen=True)
class Instr:
    """One SSA instruction; its value is referenced by its index in Program.instrs.
    arg: LOAD -> index into inputs; SCALAR -> index into scalars; CONST -> float;
    STORE -> index into outputs; REDUCE (op SUM/AMAX/AMIN/MEAN) -> index into reductions."""
    op: Op
    args: tuple = ()
    arg: Any = None


@dataclass(frozen=True)
class Program:
    batched: bool                      # the problem has an L axis (rank-3 accum example)
    inputs: tuple                      # Operand per tensor input (accum excluded)
    scalars: tuple                     # names of run-time scalar parameters
    outputs: tuple                     # Operand per plain (non-reduction) output
    reductions: tuple                  # Reduction per reduction output
    instrs: tuple                      # Instr, topologically ordered
    params: tuple = ()                 # every parameter name of the traced function, accum first
    problem: tuple = ()                # the traced (L, M, N); binding checks it only if specialised
    specialised: bool = False          # a reshape fixed literal extents: runs only at `problem`
    result_names: tuple = field(default=())   # the returned names, in order (keys of the result dict)

    def key(self):
        """A stable hex digest of the program's structure, dtypes and roles: the backend-neutral
        part of every compile-cache key (stable across processes, unlike hash())."""
        return hashlib.sha256(_canonical(self).encode()).hexdigest()[:32]

    def spans(self, operand):
        """(spans L, spans M, spans N) of an input/output operand: whether its frame stride on
        each problem axis can be nonzero, so whether a kernel must index it along that axis.

        Dims that name problem axes say so directly. A reshaped operand has literal extents in
        its dims ((2, 3, 512, 256) for a (6, 512, 256) frame), which name no axis; its program
        is specialised on the traced problem, so its traced shape pushed through its view gives
        the frame strides exactly. Spanning more axes than needed is always correct (a zero
        stride reads or writes the same element); spanning fewer is a wrong result."""
        named = tuple(a in operand.dims for a in AXES)
        if all(isinstance(d, str) or d == 1 for d in operand.dims):
            return named
        return tuple(a or b for a, b in zip(named, _view_spans(operand)))

    def describe(self):
        """Readable listing, one instruction per line (used in error notes and dumps)."""
        lines = [f"program batched={self.batched}"]
        for i, ins in enumerate(self.instrs):
            if ins.op is Op.LOAD:
                o = self.inputs[ins.arg]; tail = f"{o.name}: {o.dtype} dims={o.dims}"
            elif ins.op is Op.SCALAR:
                tail = self.scalars[ins.arg]
            elif ins.op is Op.CONST:
                tail = repr(ins.arg)
            elif ins.op is Op.STORE:
                o = self.outputs[ins.arg]; tail = f"-> {o.name}: {o.dtype} dims={o.dims}"
            elif ins.op in (Op.SUM, Op.AMAX, Op.AMIN, Op.MEAN):
                r = self.reductions[ins.arg]
                tail = f"-> {r.name}: {r.operand.dtype} over {''.join(sorted(r.over))}"
            else:
                tail = ""
            args = ", ".join(f"%{a}" for a in ins.args)
            lines.append(f"  %{i} = {ins.op.value}({args}) {tail}".rstrip())
        return "\n".join(lines)


def _canonical(x):
    """repr with sets sorted, so the text does not depend on string hash randomisation."""
    if isinstance(x, (frozenset, set)):
        return "{" + ",".join(sorted(_canonical(v) for v in x)) + "}"
    if isinstance(x, (tuple, list)):
        return "(" + ",".join(_canonical(v) for v in x) + ")"
    if isinstance(x, Op):
        return x.value
    if hasattr(x, "__dataclass_fields__"):
        return type(x).__name__ + _canonical(tuple((k, getattr(x, k)) for k in x.__dataclass_fields__))
    return repr(x)


def _view_spans(operand):
    """Spans of an operand with literal extents, from its traced shape and view (all axes when
    the view cannot be evaluated: over-indexing is safe)."""
    from .bind import order_strides, view_strides
    shape = tuple(operand.example_shape)
    if len(shape) != len(operand.dims):
        return (True, True, True)
    strides = order_strides(tuple(max(e, 1) for e in shape), operand.order)
    got = view_strides(shape, strides, operand.view)
    if got is None:
        return (True, True, True)
    return tuple(s != 0 for s in got[1])

