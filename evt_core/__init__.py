"""evt_core: epilogue visitor trees for fused GEMM kernels.

    tree = evt_core.trace(epilogue_fn, examples)
    out = evt_core.interpret(tree, A, B, **inputs)        # the NumPy reference
    kernel = evt_core.compile(tree, backend="numba_cuda")  # or "cupy", "numpy", "auto"
    out = kernel(A, B, **inputs)
"""
from . import ops
from .api import DEFAULT_BACKEND, backends, compile, interpret, trace
from .backend import Backend, Kernel, Support
from .errors import (ArgumentError, BackendNotFoundError, BackendUnavailableError, DTypeError, EvtError,
                     KernelCompileError, ResourceError, ShapeError, TraceError, UnsupportedError)
from .program import Program
from .tree.ir import Tree
from .tree.ops import Op
from .tree.trace import TensorSpec

__version__ = "0.1.0"

__all__ = ["trace", "interpret", "compile", "backends", "ops", "TensorSpec", "Tree", "Program", "Op",
           "Backend", "Kernel", "Support", "DEFAULT_BACKEND",
           "EvtError", "TraceError", "ShapeError", "DTypeError", "UnsupportedError", "BackendNotFoundError",
           "BackendUnavailableError", "KernelCompileError", "ArgumentError", "ResourceError"]
