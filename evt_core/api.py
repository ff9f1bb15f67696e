"""The public entry points: trace, interpret, compile, backends."""
import os
import time
import warnings

import numpy as np

from .backend import Support
from .call import normalize_call
from .errors import (ArgumentError, BackendUnavailableError, EvtError, KernelCompileError, TraceError,
                     UnsupportedError)
from .interpreter import evaluate_program
from .plugin.manager import PREFERENCE, plugins
from .tree.ir import Tree
from .tree.outputs import make_tree
from .tree.pipeline import run_pipeline

DEFAULT_BACKEND = "numba_cuda"
_kernels = {}


def trace(fn, examples=None):
    """Trace epilogue `fn` with `examples` ({name: array | TensorSpec | float}) into a Tree with
    its lowered Program. Every trace-time problem raises from here (TraceError, ShapeError,
    UnsupportedError)."""
    if examples is None:
        raise TraceError("trace(fn, examples) needs the examples dict {name: array | TensorSpec | float}, one "
                         "entry per parameter and per returned output")
    return run_pipeline(make_tree(fn, examples))


def interpret(tree, *args, **inputs):
    """The reference: evaluate the tree's lowered Program (what backends compile) with NumPy.
    A is (M, K) or (L, M, K), B is (K, N) or (L, K, N); returns {output name: np.ndarray} with
    each output's example dtype and shape."""
    _check_tree(tree)
    A, B, inputs = normalize_call(tree.program, args, inputs, "interpret")
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
        backend = _auto(p, tree)
    impl = p.registry.get(backend)
    check_options(backend, impl, options)
    opts = {**impl.options, **options}
    key = (backend, impl.hash(), tree.program.key(), tuple(sorted((k, repr(v)) for k, v in opts.items())))
    if key in _kernels:
        return _kernels[key]
    ok = _plugin_call(backend, "available()", impl.available)
    if not ok:
        raise BackendUnavailableError(f"backend {backend!r} is not available here: {ok.reason}")
    sup = _plugin_call(backend, "supports()", impl.supports, tree, opts)
    if not sup:
        raise UnsupportedError(f"backend {backend!r} cannot compile this tree: {sup.reason}", sup.node)
    start = time.perf_counter()
    kernel = _plugin_call(backend, "compile", p.compile, tree, impl, opts)
    kernel.compile_seconds = time.perf_counter() - start
    p.kernel_compiled(kernel, kernel.compile_seconds)
    _dump(kernel)
    _kernels[key] = kernel
    return kernel


def check_options(backend, impl, options):
    """Raises for an option name backend `backend` (its implementation `impl`) does not take,
    and for a non-bool value of a bool option ("no" or 0 would silently mean something else).
    The one check of compile options: evt_core.torch runs it when a backend or op is made."""
    unknown = set(options) - set(impl.options)
    if unknown:
        raise UnsupportedError(f"backend {backend!r} has no option {sorted(unknown)[0]!r}; it accepts "
                               f"{sorted(impl.options) or 'none'}")
    for k, v in options.items():
        if isinstance(impl.options[k], bool) and not isinstance(v, (bool, np.bool_)):
            raise ArgumentError(f"option {k}={v!r} of backend {backend!r} must be True or False")


def _plugin_call(backend, stage, fn, *args):
    """Call into a backend plugin: its own EvtErrors pass through; anything else is a bug in
    the plugin, reported as KernelCompileError naming the backend and the stage (with the
    original exception chained), not as a bare traceback from inside the plugin."""
    try:
        return fn(*args)
    except EvtError:
        raise
    except Exception as e:  # noqa: BLE001 - see the docstring
        raise KernelCompileError(backend, stage, f"{type(e).__name__}: {e} (a bug in the backend plugin)") from e


def _auto(p, tree):
    """The backend "auto" picks (the evt_select_backend hook over the available ones, fastest
    first), or BackendUnavailableError listing why each registered backend cannot run."""
    names = p.registry.names()
    ready = [n for n in PREFERENCE if n in names and p.registry.get(n).available()]
    chosen = p.select_backend(tree, ready)
    if chosen is None:
        why = "; ".join(f"{n}: {s.reason or 'available'}" for n, s in backends().items()) or "none is registered"
        disabled = f" (EVT_DISABLE_PLUGINS disables {', '.join(p.registry.disabled)})" if p.registry.disabled else ""
        raise BackendUnavailableError(f"backend='auto' found no available backend{disabled}: {why}")
    return chosen


def _check_tree(tree):
    if not isinstance(tree, Tree) or tree.program is None:
        raise TraceError(f"expected a tree from evt_core.trace(...), got {type(tree).__name__}")


def _dump(kernel):
    """EVT_DUMP=<dir>: write every stage of every compiled kernel there."""
    where = os.environ.get("EVT_DUMP")
    if not where:
        return
    stem = f"{kernel.backend}-{kernel.tree.program.key()[:12]}"
    try:
        os.makedirs(where, exist_ok=True)
        for stage, text in kernel.stages.items():
            if isinstance(text, str):
                with open(os.path.join(where, f"{stem}.{stage}.txt"), "w") as f:
                    f.write(text)
    except OSError as e:   # a debugging aid must not fail the compile it documents
        warnings.warn(f"evt: EVT_DUMP={where!r} is not a writable directory ({type(e).__name__}: {e}); "
                      "the kernel's stages were not written", RuntimeWarning, stacklevel=3)


__all__ = ["trace", "interpret", "compile", "backends", "DEFAULT_BACKEND", "EvtError"]
