"""Shape and dtype rules of the known ops. Each takes the operand types by parameter name and
the attributes, and returns the tuple of output types (one entry per output; multi-output ATen
ops such as native_layer_norm return several, read through `getitem`)."""
from __future__ import annotations

from math import prod

from .errors import check
from .types import TensorType, broadcast, is_float, make_type


def _norm_dim(d: int, rank: int) -> int:
    check(-rank - (rank == 0) <= d < max(rank, 1), "shape", f"dim {d} out of range for rank {rank}")
    return d % max(rank, 1)


def dims_of(dim, rank: int) -> tuple[int, ...]:
    """Normalised reduction dims; None or () means all dims (ATen's `sum(x)`)."""
    if dim is None or dim == ():
        return tuple(range(rank))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted({_norm_dim(d, rank) for d in dims}))


def _result_dtype(types) -> str:
    # Rank-0 constants do not promote (ATen's scalar rule): fp16 * 0.5 stays fp16.
    tensors = [t for t in types if t.shape != ()] or list(types)
    floats = [t.dtype for t in tensors if is_float(t.dtype)]
    return floats[0] if floats else tensors[0].dtype


def same(t, a):
    return (next(iter(t.values())),)


def along_dim(t, a):
    """Softmax-like ops: operands of one shape, normalised along an existing `dim`."""
    ts = list(t.values())
    check(all(x.shape == ts[0].shape for x in ts), "shape", f"operand shapes {[x.shape for x in ts]} differ")
    check(isinstance(a.get("dim"), int), "shape", f"dim must be an int, got {a.get('dim')!r}")
    _norm_dim(a["dim"], len(ts[0].shape))
    return (ts[0],)


def like_self(t, a):
    return (t["self"],)


def elementwise(t, a):
    ts = list(t.values())
    return (TensorType(broadcast([x.shape for x in ts]), _result_dtype(ts)),)


def compare(t, a):
    return (TensorType(broadcast([x.shape for x in t.values()]), "bool"),)


def where(t, a):
    ts = list(t.values())
    return (TensorType(broadcast([x.shape for x in ts]), _result_dtype(ts[1:])),)


def to_dtype(t, a):
    return (make_type(t["self"].shape, a["dtype"]),)


def one_hot(t, a):
    check(a["num_classes"] > 0, "shape", "one_hot needs num_classes= (it cannot be inferred statically)")
    return (TensorType(t["self"].shape + (a["num_classes"],), "int64"),)


def permute(t, a):
    s = t["self"].shape
    dims = tuple(_norm_dim(d, len(s)) for d in a["dims"])
    check(sorted(dims) == list(range(len(s))), "shape", f"permute dims {a['dims']} for rank {len(s)}")
    return (TensorType(tuple(s[d] for d in dims), t["self"].dtype),)


def transpose(t, a):
    s = list(t["self"].shape)
    i, j = _norm_dim(a["dim0"], len(s)), _norm_dim(a["dim1"], len(s))
    s[i], s[j] = s[j], s[i]
    return (TensorType(tuple(s), t["self"].dtype),)


def t(t, a):
    s = t["self"].shape
    check(len(s) <= 2, "shape", f"t() needs rank <= 2, got {s}")
    return (TensorType(s[::-1], t["self"].dtype),)


def view_shape(old, size) -> tuple[int, ...]:
    size = list(size)
    if -1 in size:
        known = prod(s for s in size if s != -1)
        size[size.index(-1)] = prod(old) // max(known, 1)
    check(prod(size) == prod(old), "shape", f"cannot view {tuple(old)} as {tuple(size)}")
    return tuple(size)


def view(t, a):
    return (TensorType(view_shape(t["self"].shape, a["size"]), t["self"].dtype),)


def expand(t, a):
    s, size = t["self"].shape, tuple(a["size"])
    lead = len(size) - len(s)
    out = tuple(s[i - lead] if (n == -1 and i >= lead) else n for i, n in enumerate(size))
    broadcast([s, out])
    return (TensorType(out, t["self"].dtype),)


def unsqueeze(t, a):
    s = list(t["self"].shape)
    s.insert(a["dim"] % (len(s) + 1), 1)
    return (TensorType(tuple(s), t["self"].dtype),)


def squeeze(t, a):
    s = t["self"].shape
    dims = range(len(s)) if a["dim"] is None else dims_of(a["dim"], len(s))
    return (TensorType(tuple(n for i, n in enumerate(s) if not (i in dims and n == 1)), t["self"].dtype),)


def select(t, a):
    s = t["self"].shape
    d = _norm_dim(a["dim"], len(s))
    check(-s[d] <= a["index"] < s[d], "shape", f"select index {a['index']} of extent {s[d]}")
    return (TensorType(s[:d] + s[d + 1:], t["self"].dtype),)


def select_backward(t, a):
    return (TensorType(tuple(a["input_sizes"]), t["grad_output"].dtype),)


def getitem(t, a):
    check(False, "getitem", "getitem types come from the producer's outputs")


def reduce(t, a):
    s = t["self"].shape
    dims = dims_of(a["dim"], len(s))
    out = tuple((1 if i in dims else n) for i, n in enumerate(s) if a["keepdim"] or i not in dims)
    return (TensorType(out, t["self"].dtype),)


def reduce_sum(t, a):
    (out,) = reduce(t, a)
    # ATen sums bool and integer tensors in int64 (a decomposed loss counts its valid targets so)
    wide = out.dtype == "bool" or out.dtype.startswith(("int", "uint"))
    return (TensorType(out.shape, "int64" if wide else out.dtype),)


def nll_forward(t, a):
    s = t["self"].shape
    shape = s[:1] if a["reduction"] == 0 and len(s) == 2 else ()
    return (TensorType(shape, t["self"].dtype),)


def mm(t, a):
    x, y = t["self"].shape, t["mat2"].shape
    check(len(x) == 2 and len(y) == 2 and x[1] == y[0], "shape", f"mm of {x} and {y}")
    return (TensorType((x[0], y[1]), t["self"].dtype),)


def bmm(t, a):
    x, y = t["self"].shape, t["mat2"].shape
    check(len(x) == 3 and len(y) == 3 and x[0] == y[0] and x[2] == y[1], "shape", f"bmm of {x} and {y}")
    return (TensorType((x[0], x[1], y[2]), t["self"].dtype),)


def addmm(t, a):
    (out,) = mm({"self": t["mat1"], "mat2": t["mat2"]}, a)
    broadcast([t["self"].shape, out.shape])
    return (out,)


def layer_norm(t, a):
    x, ns = t["input"], tuple(a["normalized_shape"])
    check(0 < len(ns) <= len(x.shape) and x.shape[len(x.shape) - len(ns):] == ns, "shape",
          f"normalized_shape {ns} is not a trailing part of the input shape {x.shape}")
    for p in ("weight", "bias"):
        check(p not in t or t[p].shape == ns, "shape", f"{p} of shape {t[p].shape if p in t else ()} "
              f"for normalized_shape {ns}")
    k = len(x.shape) - len(a["normalized_shape"])
    stat = TensorType(x.shape[:k] + (1,) * (len(x.shape) - k), "float32")
    return (x, stat, stat)


def layer_norm_backward(t, a):
    x = t["input"]
    w = t.get("weight", TensorType(tuple(a["normalized_shape"]), x.dtype))
    # Always three outputs, as in ATen; output_mask only says which ones are computed.
    return (x, w, w)


def _conv_out(n, k, s, p, d):
    return (n + 2 * p - d * (k - 1) - 1) // s + 1


def convolution(t, a):
    x, w = t["input"].shape, t["weight"].shape
    check(not a.get("transposed") and x[1] == w[1] * a.get("groups", 1), "shape",
          f"convolution of {x} with weight {w} (transposed convolution is not modelled)")
    sp = [_conv_out(x[2 + i], w[2 + i], a["stride"][i], a["padding"][i], a["dilation"][i])
          for i in range(len(x) - 2)]
    return (TensorType((x[0], w[0], *sp), t["input"].dtype),)


def convolution_backward(t, a):
    x, w = t["input"], t["weight"]
    return (x, w, TensorType((w.shape[0],), w.dtype))


def batch_norm(t, a):
    x = t["input"]
    stat = TensorType((x.shape[1],), "float32")
    return (x, stat, stat)


def batch_norm_backward(t, a):
    x = t["input"]
    w = t.get("weight", TensorType((x.shape[1],), x.dtype))
    return (x, w, w)


def embedding(t, a):
    return (TensorType(t["indices"].shape + t["weight"].shape[1:], t["weight"].dtype),)


def full(t, a):
    check(isinstance(a["fill_value"], (bool, int, float)), "constant",
          f"fill_value must be a Python number, got {a['fill_value']!r}")
    return (make_type(a["size"], a["dtype"]),)
