"""Properties of the core: the reference interpreter against an independent float64 oracle,
pass-by-pass preservation of results, the verifier after every pass, and size independence.

Profiles come from the repository's conftest.py (dev / ci / gpu); the caps below only keep
this CPU module inside its time budget when a profile asks for more examples.

Why pass preservation is exact (compared with ==, no ulp slack): every pass either rebuilds
the same fp32 operations (layout elimination moves permutes into load/store views, dag_to_tree
groups shared nodes into TOPO bodies, dead-store elimination drops stores nobody returns),
evaluates an all-constant op once through the same op-table entry in fp32 (constant folding),
or swaps the operands of ADD/MUL/MAXIMUM/MINIMUM (CSE), and IEEE-754 addition and
multiplication are exactly commutative in fp32. No pass reassociates, so not even one ulp may
move. (`==` rather than a bit pattern comparison because max(-0, +0) may legitimately pick
either zero once CSE has reordered its operands.)
"""
import numpy as np
import pytest
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import evt_core
from evt_core.interpreter.reference import interpret as interpret_any_stage
from evt_core.tree.outputs import make_tree
from evt_core.tree.pipeline import PIPELINE, run_pipeline
from evt_core.tree.verify import verify, verify_tree_shape

from . import reference64
from .strategies import NP_DTYPES, assert_identical, epilogues, second_problem, ulp

CAP = settings(max_examples=min(settings.default.max_examples, 80))

def check_against_float64(case, got, A, B, inputs, where=""):
    """Each output equals the float64 value rounded to its dtype, within the fp32 evaluation's
    error bound (2x the running bound) plus one ulp of the output dtype; outputs the oracle
    finds exact in fp32 must match bit for bit."""
    res = reference64.evaluate(case.spec, A, B, inputs)
    assume(not res.ambiguous)
    L, M, N, K = case.problem
    for name, _, dtype, kind, _ in case.spec.outputs:
        ref = res.values[name]
        rounded = ref.astype(np.float32).astype(NP_DTYPES[dtype]).astype(np.float64)
        e = res.bounds[name]
        bound = np.where(e == 0, 0.0, 2 * e + ulp(ref, dtype))
        from .strategies import assert_close
        assert_close(got[name], rounded, dtype, f"output {name!r} ({kind}){where}", K=K, bound=bound,
                     rtol=0.0, atol=0.0, note=f"\n{case.note()}")
        ex = case.examples[name]
        if ex.ndim >= 2 and sum(e > 1 for e in got[name].shape) >= 2:
            want_f = ex.flags.f_contiguous and not ex.flags.c_contiguous
            flag = got[name].flags.f_contiguous if want_f else got[name].flags.c_contiguous
            assert flag, f"output {name!r}: the result is not {'column' if want_f else 'row'}-major like its example"


@CAP
@given(case=epilogues())
def test_interpreter_matches_float64(case):
    note(case.source)
    tree = evt_core.trace(case.fn, case.examples)
    got = evt_core.interpret(tree, case.A, case.B, **case.inputs)
    assert list(got) == [o[0] for o in case.spec.outputs]
    check_against_float64(case, got, case.A, case.B, case.inputs)


@CAP
@given(case=epilogues())
def test_every_pipeline_prefix_preserves_results(case):
    """Interpreting the tree after passes[:k] gives the full pipeline's results exactly, and
    the verifier accepts the tree after every pass."""
    note(case.source)
    full_tree = evt_core.trace(case.fn, case.examples)
    full = evt_core.interpret(full_tree, case.A, case.B, **case.inputs)
    tree = verify(make_tree(case.fn, case.examples), "make_tree")
    for k in range(len(PIPELINE) + 1):
        if k:
            tree = PIPELINE[k - 1](tree)
            verify(tree, PIPELINE[k - 1].__name__)
        stage = "make_tree" if k == 0 else f"after {k} passes ({PIPELINE[k - 1].__name__})"
        got = interpret_any_stage(tree.replace(program=None), case.A, case.B, **case.inputs)
        for name in full:
            assert_identical(got[name], full[name], f"output {name!r} {stage}")
    verify_tree_shape(tree)
    assert tree == full_tree, "the pipeline is not deterministic: two runs built different trees"
    # run_pipeline on each prefix that can be lowered (layout nodes are gone after pass 3)
    first = PIPELINE.index(next(p for p in PIPELINE if p.__name__ == "eliminate_layout")) + 1
    for k in range(first + 1, len(PIPELINE) + 1):
        t = run_pipeline(make_tree(case.fn, case.examples), passes=PIPELINE[:k],
                         check=k == len(PIPELINE))
        got = evt_core.interpret(t, case.A, case.B, **case.inputs)
        for name in full:
            assert_identical(got[name], full[name], f"output {name!r} run_pipeline(passes=PIPELINE[:{k}])")


@CAP
@given(case=epilogues())
def test_generated_trees_pass_the_verifier(case):
    """The strategy only builds valid epilogues: traced and verified after every pass."""
    tree = run_pipeline(make_tree(case.fn, case.examples), check=True)
    verify(tree, "final")
    verify_tree_shape(tree)
    assert tree.program is not None and not tree.program.specialised


@CAP
@given(case=epilogues(), data=st.data())
def test_tree_runs_at_another_size(case, data):
    """Trees are specialised on roles, not extents: the traced tree runs at another (L, M, N,
    K) with the same roles and still matches float64."""
    note(case.source)
    tree = evt_core.trace(case.fn, case.examples)
    L, M, N, K = data.draw(second_problem(case), label="second problem")
    A, B, inputs = case.arrays_at(L, M, N, K, seed=data.draw(st.integers(0, 2 ** 32 - 1), label="seed"))
    got = evt_core.interpret(tree, A, B, **inputs)
    other = type(case)(**{**case.__dict__, "problem": (L, M, N, K)})
    check_against_float64(other, got, A, B, inputs, where=f" at (L, M, N, K) = {(L, M, N, K)}")


@pytest.mark.parametrize("dtypes", [("float32",), ("float16",), ("bfloat16",)])
def test_single_dtype_strategies(dtypes):
    """epilogues(dtypes=...) honours the dtype restriction (the conformance suite relies on it)."""
    @settings(max_examples=10)
    @given(case=epilogues(dtypes=dtypes, max_extent=4, allow_layout=False, allow_reductions=False))
    def inner(case):
        assert case.dtype == dtypes[0]
        assert all(o[2] == dtypes[0] and o[3] in ("store",) for o in case.spec.outputs)
        assert "permute" not in case.ops()
        assert max(case.problem[1:]) <= 4
    inner()


def test_nested_topological_visitors_verify():
    """A shared non-leaf value and a shared constant give a TOPO nested in a TOPO body whose
    operand is the enclosing body's ARG: legal, and the verifier must accept it."""
    from evt_core import ops

    def epi(accum):
        x = ops.relu(accum)
        return {"D": x / (x + 1.0) + 1.0}
    ex = {"accum": np.empty((2, 3), np.float32), "D": np.empty((2, 3), np.float32)}
    run_pipeline(make_tree(epi, ex), check=True)
