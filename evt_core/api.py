"""The public entry points: trace, interpret, compile, backends."""
import os
import time

from .backend import Support
from .errors import BackendUnavailableError, EvtError, TraceError, UnsupportedError
from .interpreter import evaluate_program
from .plugin.manager import PREFERENCE, plugins
from .tree.ir import Tree
from .tree.outputs import make_tree
from .tree.pipeline import run_pipeline

DEFAULT_BACKEND = "numba_cuda"
_kernels = {}


def trace(fn, examples):
    """Trace epilogue `fn` with `examples` ({name: array | TensorSpec | float}) into a Tree with
    its lowered Program. Every trace-time problem raises from here (TraceError, ShapeError,
    UnsupportedError)."""
    return run_pipeline(make_tree(fn, examples))


def interpret(tree, A, B, **inputs):
    """The reference: evaluate the tree's lowered Program (what backends compile) with NumPy.
    A is (M, K) or (L, M, K), B is (K, N) or (L, K, N); returns {output name: np.ndarray} with
    each output's example dtype and shape."""
    _check_tree(tree)
    return evaluate_program(tree.program, A, B, inputs)


def backends():
    """{name: Support} for every registered backend (and every plugin that failed to load),
    with the reason when it is unavailable."""
    p = plugins()
    out = {}
    for name in p.registry.names():
        try:
            out[name] = p.registry.get(name).available()
        except Exception as e:  # noqa: BLE001 - available() must never break the listing
            out[name] = Support(False, f"available() raised {type(e).__name__}: {e}")
    for name, err in p.registry.load_errors.items():
        out.setdefault(name, Support(False, f"plugin failed to load: {err}"))
    return out


def compile(tree, backend=DEFAULT_BACKEND, **options):  # noqa: A001 - the API's name
    """Compile `tree` with `backend` ("numba_cuda" by default, "cupy", "numpy", or "auto" for
    the best available). Returns a Kernel: `kernel(A, B, **inputs) -> dict`. Kernels are
    cached per (backend, backend version, program, options): compiling the same tree twice
    returns the same kernel."""
    _check_tree(tree)
    p = plugins()
    if backend == "auto":
        ready = [n for n in PREFERENCE if n in p.registry.names() and p.registry.get(n).available()]
        backend = p.select_backend(tree, ready)
    impl = p.registry.get(backend)
    unknown = set(options) - set(impl.options)
    if unknown:
        raise UnsupportedError(f"backend {backend!r} has no option {sorted(unknown)[0]!r}; it accepts "
                               f"{sorted(impl.options) or 'none'}")
    opts = {**impl.options, **options}
    key = (backend, impl.hash(), tree.program.key(), tuple(sorted((k, repr(v)) for k, v in opts.items())))
    if key in _kernels:
        return _kernels[key]
    ok = impl.available()
    if not ok:
        raise BackendUnavailableError(f"backend {backend!r} is not available here: {ok.reason}")
    sup = impl.supports(tree, opts)
    if not sup:
        raise UnsupportedError(f"backend {backend!r} cannot compile this tree: {sup.reason}", sup.node)
    start = time.perf_counter()
    kernel = p.compile(tree, impl, opts)
    kernel.compile_seconds = time.perf_counter() - start
    p.kernel_compiled(kernel, kernel.compile_seconds)
    _dump(kernel)
    _kernels[key] = kernel
    return kernel


def _check_tree(tree):
    if not isinstance(tree, Tree) or tree.program is None:
        raise TraceError(f"expected a tree from evt_core.trace(...), got {type(tree).__name__}")


def _dump(kernel):
    """EVT_DUMP=<dir>: write every stage of every compiled kernel there."""
    where = os.environ.get("EVT_DUMP")
    if not where:
        return
    os.makedirs(where, exist_ok=True)
    stem = f"{kernel.backend}-{kernel.tree.program.key()[:12]}"
    for stage, text in kernel.stages.items():
        if isinstance(text, str):
            with open(os.path.join(where, f"{stem}.{stage}.txt"), "w") as f:
                f.write(text)


__all__ = ["trace", "interpret", "compile", "backends", "DEFAULT_BACKEND", "EvtError"]
