"""Call-time rows, for each backend: arguments, shapes, dtypes, scalars and layouts of
`kernel(A, B, **inputs)`. Valid spellings (NumPy scalars, reversed views, ...) must give the
reference's result on the plain spelling of the same values."""
from fractions import Fraction

import numpy as np

import evt_core
from evt_core.dtypes import DTYPES
from evt_core.errors import ArgumentError, DTypeError, ResourceError, ShapeError

from .common import K, M, N, Row, against_reference, bias_tree, clean_inputs, empty, ints, operands, trace


def _call(backend, *args, tree=None, **inputs):
    return evt_core.compile(tree or bias_tree(), backend)(*args, **inputs)


def _with(**changes):
    """Clean inputs with some replaced (None: removed)."""
    base = clean_inputs()
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def _valid(backend, A=None, B=None, clean=None, tree=None, **changes):
    """(result with `changes` applied, reference on the clean inputs) for one valid spelling."""
    cA, cB = operands()
    base = clean_inputs()
    A, B = (cA if A is None else A(cA)), (cB if B is None else B(cB))
    inputs = {**base, **{k: (v(base[k]) if callable(v) else v) for k, v in changes.items()}}
    cin = {**base, **(clean or {})}
    return against_reference(backend, tree or bias_tree(), A, B, inputs, (cA, cB, cin))


def _read_only_memmap(x):
    """x as a read-only file mapping (np.memmap mode "r"): the CUDA simulator writes every
    kernel argument back after the launch, which faulted on such a mapping."""
    import os
    import tempfile
    fd, path = tempfile.mkstemp(suffix=".bin")
    os.close(fd)
    np.asarray(x).tofile(path)
    mapped = np.memmap(path, dtype=x.dtype, mode="r", shape=x.shape)
    os.unlink(path)          # the mapping keeps the data; no file is left behind
    return mapped


def _huge(backend):
    """M = 2**40 rows through a stride-0 view (no memory for A itself): D cannot be allocated."""
    A = np.lib.stride_tricks.as_strided(np.ones(K, np.float16), (2 ** 40, K), (0, 2))
    tree = trace(lambda accum: {"D": accum * 2.0}, D=empty((M, N), np.float16))
    return _call(backend, A, operands()[1], tree=tree)


def _odd_strides(x):
    """A view whose byte strides are not a multiple of the item size (values from the misaligned
    bytes of 1..2: finite, nonzero)."""
    base = np.linspace(1, 2, 64).astype(x.dtype)
    return np.lib.stride_tricks.as_strided(base, x.shape, (x.itemsize * 3 // 2,))


def _be(x):
    return x.astype(x.dtype.newbyteorder(">"))


def rows(backend, simulator=False):
    """The call rows for `backend`; `simulator`: the CUDA simulator runs them (no bfloat16)."""
    A, B = operands()
    c = clean_inputs()
    be = backend
    out = [
        # ---- how arguments are passed
        Row("aux-positional", lambda: _call(be, A, B, c["C"]), ArgumentError, "C=..."),
        Row("aux-positional-two", lambda: _call(be, A, B, c["C"], 0.5), ArgumentError, "2 extra positional"),
        Row("missing-B", lambda: _call(be, A), ArgumentError, "missing B"),
        Row("missing-A-and-B", lambda: _call(be), ArgumentError, "missing A"),
        Row("A-and-B-by-name", lambda: _by_name(be), None),
        Row("A-twice", lambda: _call(be, A, B, A=A, **c), ArgumentError, "A both"),
        Row("unknown-input-name", lambda: _call(be, A, B, bogus=1.0, **c), ShapeError, "'bogus'"),
        Row("missing-input", lambda: _call(be, A, B, **_with(C=None)), ShapeError, "missing input 'C'"),
        Row("missing-scalar", lambda: _call(be, A, B, **_with(alpha=None)), ShapeError, "missing scalar 'alpha'"),
        Row("tensor-input-given-a-number", lambda: _call(be, A, B, **_with(C=1.0)), ShapeError, "input 'C'"),
        Row("tensor-input-given-a-list", lambda: _call(be, A, B, **_with(bias=[0.0] * N)), ShapeError,
            "input 'bias'"),
        Row("masked-input", lambda: _call(be, A, B, **_with(C=np.ma.masked_less(c["C"], 0))), ArgumentError,
            "input 'C' is a masked array"),
        Row("masked-A", lambda: _call(be, np.ma.masked_array(A), B, **c), ArgumentError, "A is a masked array"),
        Row("np-matrix-operands", lambda: _valid(be, A=np.asmatrix, B=np.asmatrix), None),
        # ---- scalars
        Row("scalar-np-float32", lambda: _valid(be, alpha=np.float32(0.5)), None),
        Row("scalar-np-float64", lambda: _valid(be, alpha=np.float64(0.5)), None),
        Row("scalar-np-float16", lambda: _valid(be, alpha=np.float16(0.5)), None),
        Row("scalar-0d-array", lambda: _valid(be, alpha=np.array(0.5)), None),
        Row("scalar-0d-float16-array", lambda: _valid(be, alpha=np.array(0.5, np.float16)), None),
        Row("scalar-python-int", lambda: _valid(be, alpha=2, clean={"alpha": 2.0}), None),
        Row("scalar-np-int32", lambda: _valid(be, alpha=np.int32(2), clean={"alpha": 2.0}), None),
        Row("scalar-fraction", lambda: _valid(be, alpha=Fraction(1, 2)), None),
        Row("scalar-nan", lambda: _valid(be, alpha=float("nan"), clean={"alpha": np.nan}), None),
        Row("scalar-string", lambda: _call(be, A, B, **_with(alpha="0.5")), ArgumentError, "'alpha' is the string"),
        Row("scalar-bool", lambda: _call(be, A, B, **_with(alpha=True)), ArgumentError, "'alpha' is the bool"),
        Row("scalar-np-bool", lambda: _call(be, A, B, **_with(alpha=np.True_)), ArgumentError, "'alpha'"),
        Row("scalar-complex", lambda: _call(be, A, B, **_with(alpha=0.5 + 1j)), ArgumentError, "'alpha'"),
        Row("scalar-None", lambda: _call(be, A, B, **_with(alpha=None), alpha=None), ArgumentError, "'alpha'"),
        Row("scalar-1-element-array", lambda: _call(be, A, B, **_with(alpha=np.array([0.5]))), ArgumentError,
            "'alpha' is an array of shape (1,)"),
        Row("scalar-vector", lambda: _call(be, A, B, **_with(alpha=np.ones(N, np.float32))), ArgumentError,
            "'alpha'"),
        Row("scalar-beyond-fp32", lambda: _call(be, A, B, **_with(alpha=1e39)), ArgumentError,
            "'alpha' = 1e+39 is beyond float32"),
        Row("scalar-int-beyond-float64", lambda: _call(be, A, B, **_with(alpha=10 ** 400)), ArgumentError,
            "'alpha' = ~1e+400 is beyond float32"),
        Row("scalar-fraction-beyond-float64", lambda: _call(be, A, B, **_with(alpha=Fraction(10 ** 400, 3))),
            ArgumentError, "'alpha' = ~3.33e+399 is beyond float32"),
        *([Row("scalar-longdouble-beyond-float64", lambda: _call(be, A, B, **_with(alpha=np.longdouble("1e4000"))),
            ArgumentError, "'alpha' = np.longdouble('1e+4000') is beyond float32"),
          Row("scalar-0d-longdouble-beyond-float64",
              lambda: _call(be, A, B, **_with(alpha=np.array(np.longdouble("1e4000")))), ArgumentError,
              "'alpha' = np.longdouble('1e+4000') is beyond float32")]
          if np.finfo(np.longdouble).max > np.finfo(np.float64).max else []),   # 80-bit long double only
        Row("scalar-inf-is-valid", lambda: _valid(be, alpha=float("inf"), clean={"alpha": np.inf}), None),
        Row("scalar-bad-after-good-call", lambda: _twice(be, _with(alpha="0.5")), ArgumentError, "'alpha'"),
        # ---- batches
        Row("batched", lambda: _batched(be, (2, M, K), (2, K, N)), None),
        Row("batched-B-shared", lambda: _batched(be, (2, M, K), (K, N)), None),
        Row("batched-A-shared", lambda: _batched(be, (M, K), (2, K, N)), None),
        Row("batched-L-mismatch", lambda: _batched(be, (2, M, K), (3, K, N)), ShapeError, "A has batch 2"),
        Row("batched-tree-with-2d-operands", lambda: _batched(be, (M, K), (K, N)), ShapeError, "batched accum"),
        # ---- shapes
        Row("A-1d", lambda: _call(be, A[0], B, **c), ShapeError, "A must be a 2-D or 3-D"),
        Row("A-a-list", lambda: _call(be, A.tolist(), B, **c), ShapeError, "A must be"),
        Row("K-mismatch", lambda: _call(be, A, ints((K + 1, N)), **c), ShapeError, "K="),
        Row("batched-A-for-rank-2-tree", lambda: _call(be, ints((2, M, K)), B, **c), ShapeError, "rank-2 accum"),
        Row("M-zero", lambda: _call(be, ints((0, K)), B, **c), ShapeError, "M=0"),
        Row("input-wrong-shape", lambda: _call(be, A, B, **_with(C=ints((M, N + 1)))), ShapeError, "'C' has shape"),
        Row("row-vector-wrong-length", lambda: _call(be, A, B, **_with(bias=np.ones(N + 1, np.float32))),
            ShapeError, "'bias'"),
        Row("input-odd-byte-strides", lambda: _valid(be, bias=_odd_strides,
                                                     clean={"bias": np.ascontiguousarray(_odd_strides(c["bias"]))}),
            None),
        Row("huge-M", lambda: _huge(be), ResourceError, f"({2 ** 40},"),
        # ---- dtypes
        Row("A-float64", lambda: _call(be, A.astype(np.float64), B.astype(np.float64), **c), DTypeError,
            "A has dtype float64"),
        Row("A-B-dtypes-differ", lambda: _call(be, A, B.astype(np.float32), **c), DTypeError,
            "A is float16 but B is float32"),
        Row("input-int32", lambda: _call(be, A, B, **_with(C=c["C"].astype(np.int32))), DTypeError, "'C'"),
        Row("input-other-dtype-than-traced", lambda: _call(be, A, B, **_with(C=c["C"].astype(np.float32))),
            DTypeError, "'C' has dtype float32"),
        Row("input-big-endian-fp16", lambda: _call(be, A, B, **_with(C=_be(c["C"]))), DTypeError,
            "input 'C' is float16 stored big-endian"),
        Row("big-endian-says-astype", lambda: _call(be, A, B, **_with(C=_be(c["C"]))), DTypeError,
            "astype('<f2')"),
        Row("A-big-endian", lambda: _call(be, _be(A), _be(B), **c), DTypeError, "A is float16 stored big-endian"),
        Row("input-complex", lambda: _call(be, A, B, **_with(C=c["C"].astype(np.complex64))), DTypeError, "'C'"),
        Row("input-bool", lambda: _call(be, A, B, **_with(C=c["C"] > 0)), DTypeError, "'C'"),
        Row("input-object", lambda: _call(be, A, B, **_with(C=c["C"].astype(object))), DTypeError, "'C'"),
        Row("input-explicit-little-endian", lambda: _valid(be, C=lambda x: x.astype("<f2")), None),
        # ---- layouts
        Row("B-negative-strides", lambda: _valid(be, B=lambda b: b[::-1, ::-1].copy()[::-1, ::-1]), None),
        Row("C-negative-strides", lambda: _valid(be, C=lambda x: x[::-1].copy()[::-1]), None),
        Row("A-negative-strides", lambda: _valid(be, A=lambda a: a[:, ::-1].copy()[:, ::-1]), None),
        Row("A-column-major", lambda: _valid(be, A=np.asfortranarray), None),
        Row("C-read-only-memmap", lambda: _valid(be, C=_read_only_memmap), None),
        Row("A-read-only-memmap", lambda: _valid(be, A=_read_only_memmap), None),
        Row("C-column-major", lambda: _valid(be, C=np.asfortranarray), None),
        Row("C-strided-slice", lambda: _valid(be, C=lambda x: np.repeat(x, 2, axis=1)[:, ::2]), None),
        Row("bias-broadcast-stride-0", lambda: _valid(be, bias=lambda x: np.broadcast_to(x[:1], (N,)),
                                                      clean={"bias": np.full(N, c["bias"][0], np.float32)}), None),
    ]
    if not simulator:     # the CUDA simulator has no bfloat16
        out.append(Row("bf16-operands", lambda: _bf16(be), None))
    return [Row(f"{be}:{r.name}", r.make, r.expect, r.fragment, be) for r in out]


def _batched(backend, a_shape, b_shape):
    """A batched epilogue with a per-batch row input, at the given A and B shapes (L = 2)."""
    from .common import L
    rng = np.random.default_rng(5)
    A, B = ints(a_shape, rng=rng), ints(b_shape, rng=rng)
    tree = evt_core.trace(lambda accum, p: {"D": accum * p, "s": evt_core.ops.sum(accum, over=("L", "M"))},
                          {"accum": empty((L, M, N)), "p": empty((L, 1, N)), "D": empty((L, M, N), np.float16),
                           "s": empty((N,))})
    p = ints((L, 1, N), np.float32, rng)
    return against_reference(backend, tree, A, B, {"p": p})


def _by_name(backend):
    A, B = operands()
    c = clean_inputs()
    return _call(backend, A=A, B=B, **c), evt_core.interpret(bias_tree(), A, B, **c)


def _twice(backend, bad):
    """A good call (which may cache a fast path), then a bad one with the same signature."""
    A, B = operands()
    kernel = evt_core.compile(bias_tree(), backend)
    kernel(A, B, **clean_inputs())
    return kernel(A, B, **bad)


def _bf16(backend):
    bf = DTYPES["bfloat16"]
    A, B = operands()
    tree = trace(lambda accum, bias: {"D": accum + bias}, bias=empty((N,)), D=empty((M, N), bf))
    bias = ints((N,), np.float32)
    got = evt_core.compile(tree, backend)(A.astype(bf), B.astype(bf), bias=bias)
    return got, evt_core.interpret(tree, A.astype(np.float32).astype(bf), B.astype(bf), bias=bias)
