"""Lowering is checked: evaluating the lowered Program (what backends compile) equals
evaluating the Tree it was lowered from (the tree walker), bit for bit, after every prefix of
the pass pipeline that can be lowered, on random epilogues and on every op of the op table.

Why exact: lowering only renumbers the tree's fp32 operations into SSA form (TOPO bodies
inlined, STOREs of reductions turned into REDUCE), and both evaluators call the same op-table
entries on the same operands, so no rounding may differ. Loads are the one place where the two
differ in mechanism (the walker applies the tree's layout nodes, the Program evaluator reads
through the frame strides binding computes), which is exactly what this checks.
"""
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import evt_core
from evt_core import ops
from evt_core.interpreter import evaluate_program
from evt_core.interpreter.reference import interpret as interpret_tree
from evt_core.tree.lower import lower
from evt_core.tree.ops import ELEMENTWISE, LAYOUT, Op, REDUCTIONS
from evt_core.tree.outputs import make_tree
from evt_core.tree.pipeline import PIPELINE

from . import strategies
from .strategies import assert_identical, epilogues, second_problem

CAP = settings(max_examples=min(settings.default.max_examples, 60))


def lowerable(tree):
    """A tree can be lowered to a runnable Program once no layout node is left and every
    load/store has its role (shape propagation after the last layout change)."""
    for n in tree.nodes():
        if n.op in LAYOUT:
            return False
        if n.op in (Op.LOAD, Op.STORE) and (len(n.arg.dims) != len(n.arg.example_shape) or not n.arg.view
                                             or n.arg.view[-1][0] != "place"):
            return False
    return True


def check_program_matches_tree(tree, A, B, inputs, stage):
    program = lower(tree)
    want = interpret_tree(tree.replace(program=None), A, B, **inputs)
    got = evaluate_program(program, A, B, inputs)
    assert list(got) == list(want), f"{stage}: outputs {list(got)} vs {list(want)}"
    for name in want:
        assert_identical(got[name], want[name], f"output {name!r} {stage}\n{program.describe()}", ("program", "tree"))


@CAP
@given(case=epilogues())
def test_program_equals_tree_after_every_pipeline_prefix(case):
    note(case.source)
    tree = make_tree(case.fn, case.examples)
    checked = []
    for k in range(len(PIPELINE) + 1):
        if k:
            tree = PIPELINE[k - 1](tree)
        if lowerable(tree):
            check_program_matches_tree(tree, case.A, case.B, case.inputs, f"after PIPELINE[:{k}]")
            checked.append(k)
    assert checked and checked[-1] == len(PIPELINE), "the full pipeline's tree must be lowerable"


@CAP
@given(case=epilogues(), data=st.data())
def test_public_interpret_is_the_program_at_another_size(case, data):
    """evt_core.interpret evaluates the Program; at another problem size with the same roles
    it still equals the tree walker (the walker binds through the same Program's views)."""
    note(case.source)
    tree = evt_core.trace(case.fn, case.examples)
    L, M, N, K = data.draw(second_problem(case), label="second problem")
    A, B, inputs = case.arrays_at(L, M, N, K, seed=data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    got = evt_core.interpret(tree, A, B, **inputs)
    want = interpret_tree(tree, A, B, **inputs)
    for name in want:
        assert_identical(got[name], want[name], f"output {name!r} at {(L, M, N, K)}", ("program", "tree"))


def test_the_strategy_draws_every_elementwise_op():
    """The random property reaches every op of the table (the strategy picks a focus op)."""
    assert {op.value for op in ELEMENTWISE} == set(strategies.ELEMENTWISE)
    assert {op.value for op in REDUCTIONS} == set(strategies.REDUCTIONS)


def _apply(op, *xs):
    if op in REDUCTIONS:
        return getattr(ops, op.value)(xs[0], over="M")
    name = "neg" if op is Op.NEG else op.value
    if name == "neg":
        return -xs[0]
    infix = {Op.ADD: "__add__", Op.SUB: "__sub__", Op.MUL: "__mul__", Op.DIV: "__truediv__", Op.LT: "__lt__",
             Op.LE: "__le__", Op.GT: "__gt__", Op.GE: "__ge__"}
    if op in infix:
        return getattr(xs[0], infix[op])(xs[1])
    return getattr(ops, name)(*xs)


@pytest.mark.parametrize("op", sorted(set(ELEMENTWISE) | set(REDUCTIONS), key=lambda o: o.value),
                         ids=lambda o: o.value)
def test_every_op_program_equals_tree(op):
    """Each op on a mix of roles (accum, a row vector, a transposed tensor, a scalar), with
    a shared subexpression so dag_to_tree builds a TOPO that lowering must inline."""
    rng = np.random.default_rng(7)
    L, M, N, K = 2, 5, 4, 3
    arity = 1 if op in REDUCTIONS else ELEMENTWISE[op].arity

    def epi(accum, row, t, s):
        x = accum * s + row
        args = [x, ops.permute(t, (0, 2, 1)) + x, x * x - 1.0][:arity]
        if op in REDUCTIONS:
            return {"R": _apply(op, *args), "D": x}
        return {"D": _apply(op, *args) + x}
    A = rng.integers(-2, 3, (L, M, K)).astype(np.float16)
    B = rng.integers(-2, 3, (K, N)).astype(np.float16)
    inputs = {"row": rng.standard_normal(N).astype(np.float32),
              "t": rng.standard_normal((L, N, M)).astype(np.float16), "s": 0.75}
    ex = {"accum": np.empty((L, M, N), np.float32), **inputs, "D": np.empty((L, M, N), np.float16),
          "R": np.empty((L, N), np.float32)}
    if op not in REDUCTIONS:
        del ex["R"]
    tree = make_tree(epi, ex)
    for k, p in enumerate(PIPELINE, 1):
        tree = p(tree)
        if lowerable(tree):
            check_program_matches_tree(tree, A, B, inputs, f"op {op.value} after PIPELINE[:{k}]")


_L, _M, _N = 2, 4, 6
_LAYOUT_CASES = {
    # name: (epilogue, extra examples); inputs are drawn from the examples' shapes and dtypes
    "reshaped-input": (lambda accum, C: {"D": accum + ops.reshape(C, (_L, _M, _N))},
                       {"C": np.empty((_L * _M, _N), np.float32), "D": np.empty((_L, _M, _N), np.float32)}),
    "reshaped-output": (lambda accum: {"D": ops.reshape(accum, (_L * _M, _N))},
                        {"D": np.empty((_L * _M, _N), np.float16)}),
    "reshaped-output-merging-M-N": (lambda accum: {"D": ops.reshape(accum, (_L, _M * _N))},
                                    {"D": np.empty((_L, _M * _N), np.float32)}),
    "reversed-axes-output": (lambda accum, bias: {"D": ops.permute(accum + bias, (2, 1, 0))},
                             {"bias": np.empty((_N,), np.float32), "D": np.empty((_N, _M, _L), np.float16)}),
    "full-reduction-to-0d": (lambda accum: {"s": ops.sum(accum, over=("L", "M", "N"))},
                             {"s": np.empty((), np.float32)}),
    "output-not-spanning-L": (lambda accum, bias: {"D": bias * 2.0, "E": accum},
                              {"bias": np.empty((_N,), np.float32), "D": np.empty((_N,), np.float16),
                               "E": np.empty((_L, _M, _N), np.float32)}),
    "scalar-only-output": (lambda accum, s: {"D": s + 1.0, "E": accum},
                           {"s": 0.5, "D": np.empty((1,), np.float32), "E": np.empty((_L, _M, _N), np.float32)}),
}


@pytest.mark.parametrize("name", sorted(_LAYOUT_CASES))
@pytest.mark.parametrize("order", ["C", "F"])
def test_layouts_the_strategy_does_not_draw(name, order):
    """Reshapes (the strategy draws only permutes), 0-d and unit outputs, outputs that do not
    span L, with row- and column-major inputs (a reshape of a column-major input binds a copy)."""
    fn, extra = _LAYOUT_CASES[name]
    rng = np.random.default_rng(3)
    ex = {"accum": np.empty((_L, _M, _N), np.float32), **extra}
    tree = evt_core.trace(fn, ex)
    inputs = {k: (0.25 if isinstance(v, float) else np.asarray(rng.standard_normal(v.shape).astype(v.dtype),
                                                                 order=order))
              for k, v in extra.items() if k in tree.params}
    A = rng.integers(-2, 3, (_L, _M, 3)).astype(np.float16)
    B = rng.integers(-2, 3, (3, _N)).astype(np.float16)
    check_program_matches_tree(tree, A, B, inputs, name)
