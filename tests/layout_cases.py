"""Every layout op the core accepts, as (tree, A, B, inputs) at any problem size: reshaped and
permuted outputs, reshaped and permuted inputs (rows, columns, full tiles), broadcast inputs,
batched and unbatched. Shared by the CPU span check, the simulator run and the GPU suite, which
run them at sizes of several tiles in every dimension with poisoned outputs.

Inputs are small integers, so every result is exact in fp32 and a mismatch is a layout bug.
"""
import numpy as np

import evt_core
from evt_core import ops
from evt_core.dtypes import DTYPES


def _ints(rng, shape, dt="float16"):
    return rng.integers(-3, 4, shape).astype(np.float32).astype(DTYPES[dt])


def _problem(rng, L, M, N, K, ab):
    lead = (L,) if L else ()
    return lead, _ints(rng, lead + (M, K), ab), _ints(rng, lead + (K, N), ab)


def _case(fn, examples, inputs, A, B):
    return evt_core.trace(fn, examples), A, B, inputs


def reshaped_out_batched_bcast(L, M, N, K, ab, rng):
    """The result reshaped to (2, L/2, M, N) and added to a (2, L/2, 1, N) input."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    C = _ints(rng, (2, L // 2, 1, N))
    def epi(accum, C):
        return {"D": ops.reshape(accum, (2, L // 2, M, N)) + C}
    ex = {"accum": np.empty((L, M, N), np.float32), "C": C, "D": np.empty((2, L // 2, M, N), np.float16)}
    return _case(epi, ex, {"C": C}, A, B)


def column_from_flat(L, M, N, K, ab, rng):
    """An (M, 1) column built by reshaping a flat (2, M/2) input."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    c = _ints(rng, (2, M // 2))
    def epi(accum, c):
        return {"D": accum * ops.reshape(c, (M, 1)) + 1.0}
    ex = {"accum": np.empty(lead + (M, N), np.float32), "c": c, "D": np.empty(lead + (M, N), np.float16)}
    return _case(epi, ex, {"c": c}, A, B)


def row_from_flat(L, M, N, K, ab, rng):
    """A row vector built by reshaping a (N/2, 2) input to (N,)."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    r = _ints(rng, (N // 2, 2), "float32")
    def epi(accum, r):
        return {"D": accum + ops.reshape(r, (N,))}
    ex = {"accum": np.empty(lead + (M, N), np.float32), "r": r, "D": np.empty(lead + (M, N), np.float16)}
    return _case(epi, ex, {"r": r}, A, B)


def permuted_out(L, M, N, K, ab, rng):
    """The result stored transposed, (N, M) or (L, N, M), next to the plain one."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    bias = _ints(rng, (N,), "float32")
    perm = (0, 2, 1) if L else (1, 0)
    def epi(accum, bias):
        y = accum + bias
        return {"D": y, "T": ops.permute(y, perm)}
    ex = {"accum": np.empty(lead + (M, N), np.float32), "bias": bias, "D": np.empty(lead + (M, N), np.float16),
          "T": np.empty(lead + (N, M), np.float16)}
    return _case(epi, ex, {"bias": bias}, A, B)


def permuted_in(L, M, N, K, ab, rng):
    """An aux input passed transposed, (N, M) or (N, M, L), permuted back in the epilogue."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    C = _ints(rng, (N, M, L) if L else (N, M))
    perm = (2, 1, 0) if L else (1, 0)
    def epi(accum, C):
        return {"D": accum - ops.permute(C, perm)}
    ex = {"accum": np.empty(lead + (M, N), np.float32), "C": C, "D": np.empty(lead + (M, N), np.float32)}
    return _case(epi, ex, {"C": C}, A, B)


def reshaped_in_batched(L, M, N, K, ab, rng):
    """A (2, L/2, M, N) input reshaped onto the batch axis."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    C = _ints(rng, (2, L // 2, M, N))
    def epi(accum, C):
        return {"D": accum + ops.reshape(C, (L, M, N)) * 2.0}
    ex = {"accum": np.empty((L, M, N), np.float32), "C": C, "D": np.empty((L, M, N), np.float16)}
    return _case(epi, ex, {"C": C}, A, B)


def reshaped_permuted_in(L, M, N, K, ab, rng):
    """A reshape of a transposed input: no strides can express it, so a NumPy input is bound
    as a frame-shaped copy (a device input gets a ShapeError)."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    C = _ints(rng, (N // 2, 2, M * max(L, 1)))
    def epi(accum, C):       # merging the permuted (2, N/2) dims has no stride
        return {"D": accum + ops.reshape(ops.permute(C, (2, 1, 0)), (L, M, N) if L else (M, N))}
    ex = {"accum": np.empty(lead + (M, N), np.float32), "C": C, "D": np.empty(lead + (M, N), np.float16)}
    return _case(epi, ex, {"C": C}, A, B)


def flattened_out(L, M, N, K, ab, rng):
    """The batched result stored as (L*M, N) and as a flat (L*M*N,) vector."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    def epi(accum):
        y = ops.relu(accum)
        return {"D": ops.reshape(y, (-1, N)), "F": ops.reshape(y * 0.5, (-1,))}
    ex = {"accum": np.empty((L, M, N), np.float32), "D": np.empty((L * M, N), np.float16),
          "F": np.empty((L * M * N,), np.float32)}
    return _case(epi, ex, {}, A, B)


def broadcast_batch_input(L, M, N, K, ab, rng):
    """(L, 1, N) and (1, M, N) inputs with a column-sum over M."""
    lead, A, B = _problem(rng, L, M, N, K, ab)
    u, v = _ints(rng, (L, 1, N)), _ints(rng, (1, M, N))
    def epi(accum, u, v):
        y = accum * u + v
        return {"D": y, "S": ops.sum(y, over="M")}
    ex = {"accum": np.empty((L, M, N), np.float32), "u": u, "v": v, "D": np.empty((L, M, N), np.float16),
          "S": np.empty((L, N), np.float32)}
    return _case(epi, ex, {"u": u, "v": v}, A, B)


# name -> (builder, batched only)
CASES = {
    "reshaped_out_batched_bcast": (reshaped_out_batched_bcast, True),
    "column_from_flat": (column_from_flat, False),
    "row_from_flat": (row_from_flat, False),
    "permuted_out": (permuted_out, False),
    "permuted_in": (permuted_in, False),
    "reshaped_in_batched": (reshaped_in_batched, True),
    "reshaped_permuted_in": (reshaped_permuted_in, False),
    "flattened_out": (flattened_out, True),
    "broadcast_batch_input": (broadcast_batch_input, True),
}


def instances():
    """(case name, L) for every case: each batched case at L=6, the others at L=0 and L=6."""
    out = []
    for name, (_, batched_only) in CASES.items():
        out += [(name, 6)] if batched_only else [(name, 0), (name, 6)]
    return out


def build(name, L, M, N, K, ab="float16", seed=0):
    return CASES[name][0](L, M, N, K, ab, np.random.default_rng(seed))


def check(got, ref, what):
    """Exact equality (integer inputs) and no element left unwritten (poisoned outputs)."""
    assert set(got) == set(ref), (what, sorted(got), sorted(ref))
    for k, r in ref.items():
        g = np.asarray(_host(got[k]), np.float32)
        r = np.asarray(r, np.float32)
        assert g.shape == r.shape, (what, k, g.shape, r.shape)
        unwritten = int(np.isnan(g).sum())
        wrong = int((g != r).sum())
        assert unwritten == 0 and wrong == 0, f"{what}: {k}: {unwritten} unwritten, {wrong} wrong of {g.size}"


def _host(x):
    if hasattr(x, "get"):
        return x.get()
    if hasattr(x, "copy_to_host"):
        return x.copy_to_host()
    if type(x).__module__.startswith("torch"):
        return x.float().cpu().numpy()
    return x
