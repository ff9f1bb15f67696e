"""refine.narrow_stores: a widening cast that ends a GEMM group (softmax cross-entropy's
logits.float()) leaves the group when a fusing compiler runs the other ops, so the kernel
stores the 16-bit logits; the partitioned plan still computes what the graph does."""
import numpy as np

from evt_core import partition as P
from evt_core.partition.refine import narrow_stores
from helpers import assert_close, make_inputs


def _logits_then_loss(cast_to="float32", m=16, k=8, n=12):
    g = P.Graph()
    x, w, b = g.input("x", (m, k), "float16"), g.input("w", (n, k), "float16"), g.input("b", (n,), "float16")
    y = g.add("_to_copy", g.add("addmm", b, x, g.add("t", w)), cast_to)
    g.output(g.add("_log_softmax", y, 1, False))      # no epilogue form: runs outside the group
    return g, y.name


def _group_with_gemm(g, plan):
    return next(grp for grp in plan.groups if any(g.nodes[n].op in ("addmm", "mm") for n in grp))


def test_the_widening_cast_leaves_the_gemm_group():
    g, cast = _logits_then_loss()
    plan = P.partition(g, cache=None)
    assert cast in _group_with_gemm(g, plan)              # the solver's choice: the cast inside
    narrowed = narrow_stores(g, plan)
    narrowed.check()
    assert cast not in _group_with_gemm(g, narrowed)
    assert [cast] in narrowed.groups
    inputs = make_inputs(g)
    got, want = P.run(narrowed, inputs, backend="numpy"), P.evaluate(g, inputs)
    for o in g.outputs:
        assert_close(got[o], want[o], tol=2e-2, what=o)


def test_a_cast_that_does_not_widen_stays():
    g, _ = _logits_then_loss(cast_to="float16")
    plan = P.partition(g, cache=None)
    assert narrow_stores(g, plan) is plan


def _decomposed_log_softmax(m=16, k=8, n=12):
    """logits.float() read by the group's row max and, outside it, by the softmax's other ops
    (a log-softmax as inductor's decomposition spells it)."""
    g = P.Graph()
    x, w, b = g.input("x", (m, k), "float16"), g.input("w", (n, k), "float16"), g.input("b", (n,), "float16")
    y = g.add("_to_copy", g.add("addmm", b, x, g.add("t", w)), "float32")
    shifted = g.add("sub", y, g.add("amax", y, [1], True))
    g.output(g.add("sub", shifted, g.add("log", g.add("sum", g.add("exp", shifted), [1], True))))
    return g, y.name


def test_a_stored_cast_leaves_with_the_group_nodes_that_read_it():
    g, cast = _decomposed_log_softmax()
    plan = P.partition(g, cache=None)
    gemm = _group_with_gemm(g, plan)
    assert cast in gemm and any(g.nodes[n].op == "amax" for n in gemm)    # the solver's choice
    narrowed = narrow_stores(g, plan)
    narrowed.check()
    kept = _group_with_gemm(g, narrowed)
    assert cast not in kept and not any(g.nodes[n].op == "amax" for n in kept)
    assert set(kept) <= set(gemm)
    inputs = make_inputs(g)
    got, want = P.run(narrowed, inputs, backend="numpy"), P.evaluate(g, inputs)
    for o in g.outputs:
        assert_close(got[o], want[o], tol=2e-2, what=o)


def test_a_cast_the_group_reads_but_never_stores_stays():
    """A U-turn's loss: the cast feeds an epilogue reduction and nothing outside the group."""
    g = P.Graph()
    x, w = g.input("x", (16, 8), "float16"), g.input("w", (12, 8), "float16")
    y = g.add("_to_copy", g.add("mm", x, g.add("t", w)), "float32")
    g.output(g.add("sum", g.add("mul", y, y), [1], True))
    plan = P.partition(g, cache=None)
    assert y.name in _group_with_gemm(g, plan)
    assert narrow_stores(g, plan) is plan
