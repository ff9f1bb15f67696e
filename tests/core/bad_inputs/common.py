"""Rows of the bad-input table and the one function that checks a row.

A Row is (name, make, expect, fragment, backend):
  * make() performs the call;
  * expect is an EvtError subclass (the call must raise it, and its message must contain
    `fragment`, which names the offending variable, tensor or node), a Warning subclass (the
    call must succeed with exactly one such warning containing `fragment`), or None (the input
    is valid: the call succeeds);
  * when the call succeeds and returns (got, want), the two result dicts must agree exactly
    (want is the reference on a clean spelling of the same inputs);
  * backend "numba_cuda" rows run in a CUDA-simulator subprocess (sim_rows.py).
"""
import contextlib
import os
import warnings
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import evt_core
from evt_core.errors import EvtError
from evt_core.plugin.manager import reset_plugins

M, N, K, L = 4, 6, 3, 2
RNG = np.random.default_rng(99)


@dataclass(frozen=True)
class Row:
    name: str
    make: Callable
    expect: Any
    fragment: str = ""
    backend: str = "numpy"


def ints(shape, dtype=np.float16, rng=None):
    """Small integers (the fp32 GEMM of such operands is exact)."""
    return (rng or RNG).integers(-2, 3, shape).astype(dtype)


def empty(shape, dtype=np.float32):
    return np.empty(shape, dtype)


def trace(fn, **examples):
    return evt_core.trace(fn, {"accum": empty((M, N)), **examples})


def bias_epi(accum, C, alpha, bias):
    return {"D": alpha * accum + C + bias}


def bias_tree(c_dtype=np.float16):
    """D = alpha * accum + C + bias: a tensor input, a scalar and a row vector."""
    return trace(bias_epi, C=empty((M, N), c_dtype), alpha=0.5, bias=empty((N,)), D=empty((M, N), np.float16))


def operands(dtype=np.float16):
    """The same A, B on every call (rows build their bad and clean spellings separately)."""
    rng = np.random.default_rng(1)
    return ints((M, K), dtype, rng), ints((K, N), dtype, rng)


def clean_inputs(c_dtype=np.float16):
    """The same inputs of bias_tree() on every call."""
    rng = np.random.default_rng(2)
    return {"C": ints((M, N), c_dtype, rng), "alpha": 0.5, "bias": ints((N,), np.float32, rng)}


def against_reference(backend, tree, A, B, inputs, clean=None):
    """(kernel result on the given inputs, reference on `clean` inputs: same values, plain
    spelling) for a valid-input row."""
    cA, cB, cin = clean or (A, B, inputs)
    got = evt_core.compile(tree, backend)(A, B, **inputs)
    return got, evt_core.interpret(tree, cA, cB, **cin)


@contextlib.contextmanager
def env(**values):
    """Set (None: unset) environment variables, with a fresh plugin set inside and after."""
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        reset_plugins()
        yield
    finally:
        for k, v in old.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        reset_plugins()


def check(row):
    """Raise AssertionError describing how `row` misbehaved; return None when it behaves."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        try:
            out = row.make()
        except EvtError as e:
            if row.expect is None or not (isinstance(row.expect, type) and isinstance(e, row.expect)):
                raise AssertionError(f"{row.name}: raised {type(e).__name__}: {e}") from e
            if row.fragment not in str(e):
                raise AssertionError(f"{row.name}: {type(e).__name__} message lacks {row.fragment!r}: {e}") from e
            return None
        except Exception as e:
            raise AssertionError(f"{row.name}: untyped {type(e).__name__}: {e}") from e
    if isinstance(row.expect, type) and issubclass(row.expect, EvtError):
        raise AssertionError(f"{row.name}: expected {row.expect.__name__}, the call succeeded")
    if isinstance(row.expect, type) and issubclass(row.expect, Warning):
        hits = [str(w.message) for w in rec if issubclass(w.category, row.expect)]
        if len(hits) != 1 or row.fragment not in hits[0]:
            raise AssertionError(f"{row.name}: expected one {row.expect.__name__} with {row.fragment!r}, got "
                                 f"{[f'{w.category.__name__}: {w.message}' for w in rec]}")
    if out is not None:
        got, want = out
        assert list(got) == list(want), f"{row.name}: outputs {list(got)} vs {list(want)}"
        for k in want:
            g, w = np.asarray(got[k]), np.asarray(want[k])
            same = g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g.astype(np.float64), w.astype(
                np.float64), equal_nan=True)
            assert same, f"{row.name}: output {k!r} differs from the reference"
    return None
