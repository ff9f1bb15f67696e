"""Shared test helpers: random inputs for a graph, and a tolerance comparison."""
import numpy as np


def make_inputs(g, seed=0, classes=40):
    r = np.random.default_rng(seed)
    out = {}
    for n, node in g.nodes.items():
        if node.op != "input":
            continue
        if node.dtype == "int64":
            out[n] = r.integers(0, classes, node.shape)
        else:
            out[n] = (r.standard_normal(node.shape) * 0.5).astype(node.types[0].numpy_dtype())
    return out


def assert_close(got, want, tol=2e-2, what=""):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    err = np.max(np.abs(got - want) / (1 + np.abs(want))) if got.size else 0.0
    assert err < tol, f"{what}: max relative error {err}"
