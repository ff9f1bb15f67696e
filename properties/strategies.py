"""Hypothesis strategies for epilogues, and the tolerances they are checked with.

Public (reused by the backend conformance suite):

  epilogues(dtypes=..., max_extent=9, allow_layout=True, allow_reductions=True)
      draws a `Case`: a random epilogue function (a small expression DAG over accum, aux
      tensors of every broadcast role, run-time scalars and constants), its trace examples,
      small-integer A and B (so the fp32 GEMM is exact), the call's inputs, readable source
      and an op-list `spec` that properties.reference64 evaluates independently in float64.
  second_problem(case) -> strategy of another (L, M, N, K) with the same roles.
  tolerance(dtype, K) -> (rtol, atol);  assert_close(got, ref, dtype, what, ...).

How a case stays well-conditioned: every value's magnitude is bounded statically (a value
that would exceed LIMIT is squashed through tanh first); log/sqrt/rsqrt read abs(x) + 1,
division divides by abs(x) + 1, exp reads tanh(x); comparisons and `where` conditions only
read values that are exact in fp32 (sums and products of quarter-grid values whose bits fit
the fp32 mantissa), so fp32 and float64 always take the same branch.
"""
import math
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DTYPE_NAMES = ("float32", "float16", "bfloat16")
NP_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
             "bfloat16": np.dtype(ml_dtypes.bfloat16)}
QUARTERS = tuple(i / 4 for i in range(-8, 9))           # exact in fp16, bf16 and fp32
CONSTANTS = (0.5, 1.0, 2.0, -1.5, 0.25, 3.0, -1.0)
LIMIT = 4096.0                                          # bound on |any value|; fp16 holds 65504

UNARY = ("relu", "gelu", "gelu_tanh", "gelu_tanh_grad", "gelu_grad", "sigmoid", "silu", "tanh", "exp", "log",
         "sqrt", "rsqrt", "abs", "neg", "erf")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "lt", "le", "gt", "ge")
TERNARY = ("multiply_add", "where")
ELEMENTWISE = UNARY + BINARY + TERNARY
COMPARE = ("lt", "le", "gt", "ge")
REDUCTIONS = ("sum", "amax", "amin", "mean")
TRANSCENDENTAL = frozenset({"gelu", "gelu_tanh", "gelu_tanh_grad", "gelu_grad", "sigmoid", "silu", "tanh", "exp",
                            "log", "sqrt", "rsqrt", "div", "erf"})
ROLES = ("full", "full_f", "row", "row2", "col", "shared", "perbatch", "transposed")
BATCHED_ONLY = frozenset({"shared", "perbatch"})

_INFIX = {"add": "+", "sub": "-", "mul": "*", "div": "/", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


@dataclass(frozen=True)
class Spec:
    """The op list an independent evaluator runs. `nodes[i]` is (op, args, attr): args index
    earlier nodes; leaves are ("accum", (), None), ("input", (), name), ("scalar", (), name),
    ("const", (), value); ("permute", (i,), dims) transposes. `outputs` holds
    (name, node, dtype, kind, attr) with kind "store" (attr None), "permute" (attr dims) or a
    reduction name (attr (axes, drop): reduced axis letters and, per reduced axis, whether
    the output drops it or keeps it as 1). Plain outputs have the full problem shape."""
    nodes: tuple
    outputs: tuple
    batched: bool


@dataclass
class Case:
    fn: object
    examples: dict
    A: np.ndarray
    B: np.ndarray
    inputs: dict
    dtype: str
    source: str
    spec: Spec
    problem: tuple = ()          # (L, M, N, K); L = 1 when unbatched
    roles: dict = field(default_factory=dict)     # input name -> role (or "scalar")
    shared_b: bool = False       # batched problem with a 2-D B

    @property
    def batched(self):
        return self.spec.batched

    def ops(self):
        """The set of op names the spec uses (for coverage statistics)."""
        return {n[0] for n in self.spec.nodes} | {o[3] for o in self.spec.outputs}

    def arrays_at(self, L, M, N, K, seed=0):
        """(A, B, inputs) for the same epilogue at another problem size, same roles."""
        rng = np.random.default_rng(seed)
        A, B = _gemm_operands(rng, self.batched, self.shared_b, L, M, N, K, self.dtype)
        inputs = {}
        for name, role in self.roles.items():
            if role == "scalar":
                inputs[name] = float(rng.choice(QUARTERS))
            else:
                dt = str(self.examples[name].dtype)
                shape = role_shape(role, self.batched, L, M, N)
                vals = rng.choice(QUARTERS, size=shape)
                inputs[name] = _layout(vals.astype(np.float32).astype(NP_DTYPES[dt]), role)
        return A, B, inputs

    def note(self):
        L, M, N, K = self.problem
        return (f"(L, M, N, K) = {self.problem if self.batched else (M, N, K)}, batched={self.batched}, "
                f"input dtype {self.dtype}, roles {self.roles}\n{self.source}")


def role_shape(role, batched, L, M, N):
    frame = (L, M, N) if batched else (M, N)
    return {"full": frame, "full_f": frame, "row": (N,), "row2": (1, N), "col": (M, 1), "shared": (M, N),
            "perbatch": (L, 1, N), "transposed": frame[:-2] + (N, M)}[role]


def _layout(x, role):
    return np.asfortranarray(x) if role == "full_f" else np.ascontiguousarray(x)


def _gemm_operands(rng, batched, shared_b, L, M, N, K, dtype):
    dt = NP_DTYPES[dtype]
    a_shape = (L, M, K) if batched else (M, K)
    b_shape = (K, N) if (not batched or shared_b) else (L, K, N)
    A = rng.integers(-2, 3, a_shape).astype(np.float32).astype(dt)
    B = rng.integers(-2, 3, b_shape).astype(np.float32).astype(dt)
    return A, B


# ---------------------------------------------------------------------------------------------
# the DAG builder


class _Builder:
    """Records nodes with static facts: magnitude bound, fp32 exactness (via fractional bits
    of the quarter grid), whether the value depends on accum."""

    def __init__(self, draw, acc_bound):
        self.draw = draw
        self.nodes, self.mag, self.frac, self.exact, self.dep = [], [], [], [], []
        self.acc_bound = acc_bound
        self.py = []
        self.hidden = set()            # raw loads of transposed inputs: only read through permute

    def add(self, op, args=(), attr=None):
        m, f, e, d = self._facts(op, args, attr)
        self.nodes.append((op, tuple(args), attr))
        # a Python float in the generated source (infix arithmetic on literals is not traced)
        self.py.append(op == "const" or (op in _INFIX or op == "neg") and all(self.py[i] for i in args))
        self.mag.append(m); self.frac.append(f); self.exact.append(e); self.dep.append(d)
        return len(self.nodes) - 1

    def _facts(self, op, a, attr):
        mg, fr, ex, dp = self.mag, self.frac, self.exact, self.dep
        if op == "accum":
            return self.acc_bound, 0, True, True
        if op in ("input", "scalar"):
            return 2.0, 2, True, False
        if op == "const":
            return abs(attr), 2, True, False
        if op == "permute":
            return mg[a[0]], fr[a[0]], ex[a[0]], dp[a[0]]
        dep = any(dp[i] for i in a)
        if op in COMPARE:
            return 1.0, 0, True, dep
        if op in ("add", "sub"):
            m, f = mg[a[0]] + mg[a[1]], max(fr[a[0]], fr[a[1]])
        elif op == "mul":
            m, f = mg[a[0]] * mg[a[1]], fr[a[0]] + fr[a[1]]
        elif op == "multiply_add":
            m, f = mg[a[0]] * mg[a[1]] + mg[a[2]], max(fr[a[0]] + fr[a[1]], fr[a[2]])
        elif op in ("neg", "abs", "relu"):
            m, f = mg[a[0]], fr[a[0]]
        elif op in ("maximum", "minimum"):
            m, f = max(mg[a[0]], mg[a[1]]), max(fr[a[0]], fr[a[1]])
        elif op == "where":
            m, f = max(mg[a[1]], mg[a[2]]), max(fr[a[1]], fr[a[2]])
        else:
            bound = {"tanh": 1.0, "sigmoid": 1.0, "exp": math.e * (1 + 1e-6), "rsqrt": 1.0,
                     "gelu_tanh_grad": 1.2, "gelu_grad": 1.2, "log": math.log1p(mg[a[0]]) + 1e-3,
                     "sqrt": math.sqrt(mg[a[0]]) + 1e-3,
                     "erf": min(1.0, 2 / math.sqrt(math.pi) * mg[a[0]]) * 1.0001}.get(op, mg[a[0]] * 1.0001 if a else 0)
            if op == "div":
                bound = mg[a[0]]
            return bound, 0, False, dep
        exact = all(ex[i] for i in a) and (m == 0 or math.log2(m) + f <= 22)
        return m, f, exact, dep

    def tame(self, i):
        """i, or tanh(i) when i's magnitude could push a product/sum over LIMIT."""
        return i if self.mag[i] <= math.sqrt(LIMIT) else self.add("tanh", (i,))

    def pick(self, exact=False):
        pool = [i for i in range(len(self.nodes)) if i not in self.hidden and (self.exact[i] or not exact)]
        # prefer recent nodes (deep chains) while allowing any earlier one (shared values)
        k = self.draw(st.one_of(st.just(len(pool) - 1), st.integers(0, len(pool) - 1)))
        return pool[k]

    def elementwise(self, op):
        if op in COMPARE:
            a, c = self.pick(exact=True), self.pick(exact=True)
            if self.py[a] and self.py[c]:
                a = 0                  # two Python floats would compare to a bool, not a value
            return self.add(op, (a, c))
        if op == "where":
            return self.add(op, (self.pick(exact=True), self.pick(), self.pick()))
        if op in ("log", "sqrt", "rsqrt"):
            x = self.add("abs", (self.pick(),))
            return self.add(op, (self.add("add", (x, self.const(1.0))),))
        if op == "exp":
            return self.add(op, (self.add("tanh", (self.pick(),)),))
        if op == "div":
            a, b = self.pick(), self.pick()
            d = self.add("add", (self.add("abs", (b,)), self.const(1.0)))
            return self.add(op, (a, d))
        if op in ("mul", "multiply_add"):
            args = [self.tame(self.pick()), self.tame(self.pick())]
            if op == "multiply_add":
                args.append(self.pick())
        elif op in UNARY:
            args = [self.pick()]
        else:
            args = [self.pick(), self.pick()]
        i = self.add(op, args)
        if self.mag[i] > LIMIT:
            i = self.add("tanh", (i,))
        return i

    def const(self, v):
        return self.add("const", (), float(v))


def _var(b, i):
    op, _, attr = b.nodes[i]
    return repr(attr) if op == "const" else f"v{i}"


def _expr(b, i, params):
    op, a, attr = b.nodes[i]
    v = [_var(b, j) for j in a]
    if op == "accum":
        return "accum"
    if op in ("input", "scalar"):
        return attr
    if op == "permute":
        return f"ops.permute({v[0]}, {attr})"
    if op in _INFIX:
        return f"{v[0]} {_INFIX[op]} {v[1]}"
    if op == "neg":
        return f"-{v[0]}"
    return f"ops.{op}({', '.join(v)})"


def _over(axes):
    return repr(axes[0]) if len(axes) == 1 else repr(tuple(axes))


def _render(b, params, outputs):
    lines = [f"def epilogue({', '.join(params)}):"]
    for i, (op, _, _) in enumerate(b.nodes):
        if op != "const":
            lines.append(f"    v{i} = {_expr(b, i, params)}")
    items = []
    for name, i, _, kind, attr in outputs:
        if kind == "store":
            items.append(f"{name!r}: {_var(b, i)}")
        elif kind == "permute":
            items.append(f"{name!r}: ops.permute({_var(b, i)}, {attr})")
        else:
            items.append(f"{name!r}: ops.{kind}({_var(b, i)}, over={_over(attr[0])})")
    lines.append("    return {" + ", ".join(items) + "}")
    return "\n".join(lines) + "\n"


def _build_fn(source):
    from evt_core import ops
    scope = {"ops": ops}
    exec(compile(source, "<epilogue>", "exec"), scope)  # noqa: S102 - generated test code
    return scope["epilogue"]


# ---------------------------------------------------------------------------------------------
# the strategy


def _grid_array(draw, shape, dtype, values=QUARTERS):
    x = draw(hnp.arrays(np.float32, shape, elements=st.sampled_from(values)))
    return x.astype(NP_DTYPES[dtype])


@st.composite
def epilogues(draw, dtypes=DTYPE_NAMES, max_extent=9, allow_layout=True, allow_reductions=True):
    dtypes = tuple(dtypes)
    batched = draw(st.booleans())
    L = draw(st.integers(1, 3)) if batched else 1
    M, N, K = (draw(st.integers(1, max_extent)) for _ in range(3))
    dtype = draw(st.sampled_from(dtypes))
    shared_b = batched and draw(st.booleans())
    a_shape = (L, M, K) if batched else (M, K)
    b_shape = (K, N) if (not batched or shared_b) else (L, K, N)
    ints = tuple(float(i) for i in range(-2, 3))
    A, B = _grid_array(draw, a_shape, dtype, ints), _grid_array(draw, b_shape, dtype, ints)

    b = _Builder(draw, 4.0 * max_extent)
    params, examples, inputs, roles = ["accum"], {}, {}, {}
    frame = (L, M, N) if batched else (M, N)
    examples["accum"] = np.empty(frame, np.float32)
    b.add("accum")
    roles_ok = [r for r in ROLES if (batched or r not in BATCHED_ONLY) and (allow_layout or r != "transposed")]
    for k in range(draw(st.integers(0, 3))):
        role, name = draw(st.sampled_from(roles_ok)), f"in{k}"
        dt = draw(st.sampled_from(dtypes))
        x = _layout(_grid_array(draw, role_shape(role, batched, L, M, N), dt), role)
        params.append(name); examples[name] = x; inputs[name] = x; roles[name] = role
        i = b.add("input", (), name)
        if role == "transposed":
            b.hidden.add(i)
            b.add("permute", (i,), (0, 2, 1) if batched else (1, 0))
    for k in range(draw(st.integers(0, 2))):
        name = f"s{k}"
        params.append(name)
        examples[name] = draw(st.sampled_from(QUARTERS))
        inputs[name] = draw(st.sampled_from(QUARTERS))
        roles[name] = "scalar"
        b.add("scalar", (), name)
    for _ in range(draw(st.integers(0, 2))):
        b.const(draw(st.sampled_from(CONSTANTS)))

    focus = draw(st.sampled_from(ELEMENTWISE))
    b.elementwise(focus)
    for _ in range(draw(st.integers(0, 6))):
        b.elementwise(draw(st.sampled_from(ELEMENTWISE)))

    outputs = []
    axes_all = ("L", "M", "N") if batched else ("M", "N")
    dep_nodes = [i for i in range(len(b.nodes)) if b.dep[i] and b.nodes[i][0] != "permute"]
    kinds = ["store"] + (["permute"] if allow_layout else []) + (list(REDUCTIONS) if allow_reductions else [])
    n_out = draw(st.integers(1, 3))
    for k in range(n_out):
        # the first output is the last value (so the whole DAG is live); others anything
        i = len(b.nodes) - 1 if k == 0 else draw(st.sampled_from(dep_nodes))
        kind = draw(st.sampled_from(kinds))
        if kind == "permute" and not b.dep[i]:
            kind = "store"
        odt = draw(st.sampled_from(dtypes))
        name = f"out{k}"
        if kind == "store":
            shape, attr = frame, None
        elif kind == "permute":
            attr = (0, 2, 1) if batched else (1, 0)
            shape = tuple(frame[d] for d in attr)
        else:
            axes = tuple(a for a in axes_all if draw(st.booleans()))
            if not axes:
                axes = (draw(st.sampled_from(axes_all)),)
            drop = tuple(draw(st.booleans()) for _ in axes)
            attr = (axes, drop)
            shape = tuple(1 if a in axes else e for a, e in zip(axes_all, frame)
                          if not (a in axes and drop[axes.index(a)]))
        order = draw(st.sampled_from("CF"))
        examples[name] = np.empty(shape, NP_DTYPES[odt], order=order)
        outputs.append((name, i, odt, kind, attr))

    source = _render(b, params, outputs)
    spec = Spec(tuple(b.nodes), tuple(outputs), batched)
    return Case(_build_fn(source), examples, A, B, inputs, dtype, source, spec, (L, M, N, K), roles, shared_b)


@st.composite
def second_problem(draw, case, max_extent=9):
    """Another (L, M, N, K) for `case` with the same roles: an extent of 1 stays 1 (it decided
    a broadcast role at trace time), any other extent moves to another value >= 2."""
    def other(e, lo):
        if e == 1 and lo == 2:
            return 1
        choices = [v for v in range(lo, max_extent + 1) if v != e] or [e]
        return draw(st.sampled_from(choices))
    L, M, N, K = case.problem
    L2 = other(L, 2) if case.batched else 1
    if case.batched and L == 1:
        L2 = 1
    return L2, other(M, 2), other(N, 2), other(K, 1)


# ---------------------------------------------------------------------------------------------
# tolerances

_TABLE = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5)}
U32 = 2.0 ** -24


def tolerance(dtype, K=1):
    """(rtol, atol) for comparing a `dtype` result with a reference (toolchain-notes §5.1),
    widened by the GEMM accumulation term c*K*u*(|A||B|)ij, with |A|, |B| <= 2 here."""
    rtol, atol = _TABLE[str(np.dtype(NP_DTYPES[str(dtype)]))] if str(dtype) in NP_DTYPES else _TABLE[dtype]
    return rtol + 2 * K * U32, atol + 2 * K * U32 * 4.0


def ulp(x, dtype):
    """Spacing of `dtype` at |x| (elementwise, float64), subnormals included."""
    fi = ml_dtypes.finfo(NP_DTYPES[dtype]) if dtype == "bfloat16" else np.finfo(NP_DTYPES[dtype])
    a = np.abs(np.asarray(x, np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    sub = float(fi.smallest_subnormal)
    return np.maximum(np.exp2(e) * float(fi.eps), sub)


def assert_identical(a, b, what, names=("", "")):
    """a and b have one dtype and shape and equal values (NaN equal to NaN), else an
    AssertionError at the first differing element; `names` label the two sides."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, f"{what}: {a.dtype}{a.shape} vs {b.dtype}{b.shape}"
    fa, fb = a.astype(np.float64), b.astype(np.float64)
    same = (fa == fb) | (np.isnan(fa) & np.isnan(fb))
    if not same.all():
        idx = tuple(int(i) for i in np.argwhere(~same)[0])
        na, nb = (f"{n} " if n else "" for n in names)
        raise AssertionError(f"{what}: differs at {idx}: {na}{fa[idx]!r} vs {nb}{fb[idx]!r} "
                             f"({int((~same).sum())} elements differ)")


def assert_close(got, ref, dtype, what, *, K=1, bound=None, rtol=None, atol=None, note=""):
    """Staged comparison of `got` with `ref` (float64 or any dtype): first the dtype, then the
    shape, then |got - ref| <= atol + rtol*|ref| + bound (bound: an optional elementwise
    float64 error bound, e.g. from reference64). NaNs must match NaNs. The failure message
    names the stage, the worst element, its index and the tolerance there."""
    want_dt = NP_DTYPES[dtype]
    got_a = np.asarray(got)
    if got_a.dtype != want_dt:
        raise AssertionError(f"{what}: dtype {got_a.dtype}, expected {want_dt}{note}")
    ref_a = np.asarray(ref)
    if got_a.shape != ref_a.shape:
        raise AssertionError(f"{what}: shape {got_a.shape}, expected {ref_a.shape}{note}")
    r0, a0 = tolerance(dtype, K)
    rtol = r0 if rtol is None else rtol
    atol = a0 if atol is None else atol
    g, r = got_a.astype(np.float64), ref_a.astype(np.float64)
    nan_g, nan_r = np.isnan(g), np.isnan(r)
    if (nan_g != nan_r).any():
        idx = tuple(int(i) for i in np.argwhere(nan_g != nan_r)[0])
        raise AssertionError(f"{what}: NaN mismatch at {idx}: got {g[idx]}, expected {r[idx]}{note}")
    tol = atol + rtol * np.abs(r)
    if bound is not None:
        tol = tol + np.broadcast_to(np.asarray(bound, np.float64), r.shape)
    with np.errstate(invalid="ignore"):
        err = np.where(nan_r, 0.0, np.abs(g - r))
        inf_ok = np.isinf(r) & (g == r)
        err = np.where(inf_ok, 0.0, err)
    bad = err > tol
    if bad.any():
        excess = np.where(bad, err - tol, -np.inf)
        idx = np.unravel_index(int(np.argmax(excess)), err.shape)
        idx = tuple(int(i) for i in idx)
        raise AssertionError(
            f"{what} ({dtype}): {int(bad.sum())} of {err.size} elements out of tolerance; worst at {idx}: "
            f"got {g[idx]!r}, expected {r[idx]!r}, |err| {err[idx]:.3g} > tol {tol[idx]:.3g} "
            f"(max |err| {err.max():.3g}){note}")
