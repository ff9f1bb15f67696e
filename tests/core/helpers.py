"""Small shared helpers for the core tests."""
import numpy as np

import evt_core

RNG = np.random.default_rng(1234)


def ints(shape, dtype=np.float16, lo=-2, hi=3):
    """Small integers: the fp32 GEMM of such operands is exact."""
    return RNG.integers(lo, hi, shape).astype(dtype)


def normal(shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def empty(shape, dtype=np.float32):
    return np.empty(shape, dtype)


def gemm(A, B):
    acc = np.matmul(np.asarray(A, np.float64), np.asarray(B, np.float64))
    return acc


def trace(fn, **examples):
    return evt_core.trace(fn, examples)
