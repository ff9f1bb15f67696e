"""A GEMM whose columns the graph splits into blocks and selects (the fused QKV projection of
attention: N = 3 * hidden viewed as (..., 3, hidden), the 3 moved to the front, then select 0,
1, 2): the group lowers as a GEMM batched over the blocks (lowering._column_splits) whose
kernel stores the stacked blocks, and the selects after it are left to the caller
(lowering._peelable). Each fused result equals the unpartitioned evaluation."""
import numpy as np
import pytest

from evt_core import partition as P
from helpers import assert_close, make_inputs


def _qkv(consumer="mm", m=8, k=16, h=8, dtype="float32"):
    """x (m, k) @ w^T + b, N = 3h, viewed (m, 3, h), permuted to (3, m, h), made contiguous
    and selected into q, k, v; consumer: "mm" (q @ k^T and v are the outputs, so each block
    is read outside the group) or "relu" (relu(q) joins the group)."""
    g = P.Graph()
    x, w, b = g.input("x", (m, k), dtype), g.input("w", (3 * h, k), dtype), g.input("b", (3 * h,), dtype)
    y = g.add("clone", g.add("permute", g.add("view", g.add("addmm", b, x, g.add("t", w)), (m, 3, h)), (1, 0, 2)))
    q, kk, v = (g.add("select", y, 0, i) for i in range(3))
    if consumer == "mm":
        g.output(g.add("mm", q, g.add("t", kk)), v)
    else:
        g.output(g.add("relu", q), kk, v)
    return g


def _needed(g, plan):
    where = {n: k for k, grp in enumerate(plan.groups) for n in grp}
    return {u for n, k in where.items() for u in g.nodes[n].inputs if where.get(u, k) != k} | set(g.outputs)


def _run(g, tol=1e-5):
    inputs = make_inputs(g)
    plan = P.partition(g, cache=None)
    got, want = P.run(plan, inputs, backend="numpy"), P.evaluate(g, inputs)
    for o in g.outputs:
        assert_close(got[o], want[o], tol=tol, what=o)
    return plan, got


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_qkv_projection_fuses_as_one_column_split_gemm(dtype):
    g = _qkv(dtype=dtype)
    plan, got = _run(g, 1e-5 if dtype == "float32" else 2e-2)
    k, grp = next((k, grp) for k, grp in enumerate(plan.groups) if "addmm" in grp)
    assert {"select", "select_1", "select_2"} <= set(grp)
    gt = P.group_tree(g, grp, _needed(g, plan))
    assert gt.b_view == (16, 3, 8)                      # B's (K, 3 * h) columns as 3 batches
    assert {"select", "select_1", "select_2"} <= set(gt.peeled)
    assert list(gt.outputs.values()) == ["clone"]       # one kernel, the three blocks stacked
    assert gt.tree.program.batched
    assert k in got.fused and not got.unfused, got.unfused


def test_the_kernel_computes_the_blocks_of_the_unsplit_gemm():
    """The batched kernel on B's column blocks gives the (3, m, h) blocks of x @ w^T + b."""
    import evt_core
    g = _qkv()
    plan = P.partition(g, cache=None)
    grp = next(grp for grp in plan.groups if "addmm" in grp)
    gt = P.group_tree(g, grp, _needed(g, plan))
    rng = np.random.default_rng(0)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((8, 16), (24, 16), (24,)))
    B3 = np.ascontiguousarray(np.transpose(w.T.reshape(gt.b_view), (1, 0, 2)))
    out = evt_core.compile(gt.tree, backend="numpy")(x, B3, in_0=b)["o0"]
    want = np.transpose((x @ w.T + b).reshape(8, 3, 8), (1, 0, 2))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


def test_an_op_on_a_select_stays_out_of_the_gemm_group():
    """relu(q) computes on a third of the GEMM's columns, which is not the epilogue's frame
    (rules.fits_frame): the partitioner keeps it out of the GEMM's group, so the GEMM still
    fuses (its selects peeled) and relu runs on its own. Before this rule the solver put relu
    in the group and lowering had to refuse the whole group (no epilogue op indexes)."""
    plan, got = _run(_qkv("relu"))
    grp = next(grp for grp in plan.groups if "addmm" in grp)
    assert "relu" not in grp
    assert got.fused and not got.unfused, got.unfused


@pytest.mark.parametrize("permuted", [False, True])
def test_a_column_split_only_where_the_frame_cannot_store_the_layout(permuted):
    """relu(x @ w^T) viewed (8, 3, 8) is stored by strides of the (M, N) frame, so the group
    lowers as it is; moving the 3 to the front needs the column split (no select, nothing
    peeled: the batched accumulator is already in that layout)."""
    g = P.Graph()
    x, w = g.input("x", (8, 16), "float32"), g.input("w", (24, 16), "float32")
    y = g.add("view", g.add("relu", g.add("mm", x, g.add("t", w))), (8, 3, 8))
    g.output(g.add("permute", y, (1, 0, 2)) if permuted else y)
    plan, got = _run(g)
    grp = next(grp for grp in plan.groups if "mm" in grp)
    gt = P.group_tree(g, grp, _needed(g, plan))
    assert got.fused and not got.unfused and gt.peeled == ()
    assert gt.b_view == ((16, 3, 8) if permuted else None)
