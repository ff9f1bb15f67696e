"""PyTorch integration: train through evt kernels with torch.compile.

    model = torch.compile(model, backend="evt")                       # defaults
    model = torch.compile(model, backend=evt_core.torch.backend(kernels="cupy"))
    loss = loss_fn(model(x), y); loss.backward(); opt.step()
    for r in evt_core.torch.reports():                                # one per compiled graph
        r.plan, r.fused, r.unfused, r.bytes_saved, r.to_dot()

    f = evt_core.torch.kernel_op(tree)       # any traced tree as a torch custom op
    out = f(A, B, C=C, alpha=0.5)            # {name: tensor}, on A's device

torch is imported only when one of these is used, so `import evt_core` never needs it. The
name "evt" is registered with torch._dynamo through the `torch_dynamo_backends` entry point
of the installed package; `register()` does the same for an uninstalled checkout.
"""
from __future__ import annotations


def backend(kernels: str = "auto", **options):
    """A torch.compile backend. kernels: "auto" (the best available GPU backend; CPU tensors
    always run the NumPy backend), "cupy", "numba_cuda" or "numpy". Options: passes (run the
    EVT graph passes, default True), solver ("bnb" | "greedy" | "milp"), time_limit (solver
    seconds per graph, default 30), strict (raise instead of running a graph unfused when
    planning fails), cudagraphs (run forward and backward under torch's CUDA graph trees;
    graphs with CPU tensors run without), rebatch (run a GEMM whose result the graph splits
    into a batch dimension, e.g. attention heads, as a batched GEMM with strided A, so that
    group fuses; default False until it is measured on a GPU), uturn (compute a loss compiled
    with its model and its gradient in the forward GEMM's epilogue: evt_core/torch/uturn.py;
    default True), rest (how the ops outside evt kernels run: "inductor" compiles them with
    TorchInductor around the evt kernels, "torch" runs the graph's ATen ops one kernel each,
    "auto", the default, takes inductor for CUDA graphs and torch ops on the CPU:
    evt_core/torch/inductor.py), partitioner (how the joint graph splits into forward and
    backward: "auto", the default, takes torch's min-cut partitioner for a graph holding a loss
    that inductor's decompositions broke up and the default partitioner elsewhere; "min_cut" or
    "default" force one: evt_core/torch/saving.py), bare_gemms (on a GPU, what runs a GEMM group
    with nothing to fuse, the accumulator at most plus a bias: "evt" kernels, the default, or
    "torch", i.e. cuBLAS; evt_core/torch/planning.bare_gemm), and any compile option of the
    kernel backend ("auto" takes the options every GPU backend has; name the backend for its
    own). Every argument is checked here, so a typo raises at once, on a CPU too."""
    from .compiler import EvtBackend
    return EvtBackend(kernels=kernels, **options)


def dynamo_backend(gm, example_inputs):
    """`torch.compile(model, backend="evt")`: the backend with default options."""
    return backend()(gm, example_inputs)


def register(name: str = "evt") -> None:
    """Make `backend="evt"` resolve without the installed entry point (idempotent)."""
    from torch._dynamo import list_backends
    from torch._dynamo.backends.registry import register_backend
    if name not in list_backends(exclude_tags=()):
        register_backend(compiler_fn=dynamo_backend, name=name)


def reports():
    """One `Report` per graph compiled with the evt backend in this process, oldest first."""
    from .compiler import reports as _reports
    return _reports()


def clear_reports() -> None:
    from .compiler import clear_reports as _clear
    _clear()


def kernel_op(tree, kernels: str = "auto", **options):
    """`tree` (from evt_core.trace) as a torch callable `f(A, B, **inputs) -> {name: tensor}`
    through the custom op torch.ops.evt.run."""
    from .ops import kernel_op as _kernel_op
    return _kernel_op(tree, kernels, **options)


__all__ = ["backend", "dynamo_backend", "register", "reports", "clear_reports", "kernel_op"]
