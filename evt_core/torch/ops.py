"""Every compiled evt kernel as a torch custom op: `torch.ops.evt.run(key, A, B, inputs, scalars)`.

One op serves every kernel: `key` names an entry of a process-wide registry that holds the
traced tree, so torch.compile, CUDA graphs and autograd-generated graphs see an ordinary op
with a string constant, and its fake implementation computes the output shapes from the
tree's roles without running anything. At run time the device of A picks the backend: CUDA
tensors go, in place and on the caller's current stream, to the requested GPU backend (the
best available one for "auto"); CPU tensors go to the NumPy backend (so the whole path runs
without a GPU). Outputs are fresh tensors on A's device; inputs are never written.
"""
from __future__ import annotations

import threading
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field

import numpy as np

from ..bind import expected_shape, output_strides
from ..dtypes import DTYPES, bfloat16
from ..errors import ArgumentError, BackendUnavailableError, ShapeError, TraceError

_LOCK = threading.Lock()
_REGISTRY: dict[str, "Entry"] = {}
_GPU_PREFERENCE = ("cupy", "numba_cuda")


@dataclass
class Entry:
    """A registered kernel: the traced tree, which backend CUDA tensors use ("auto" or a
    name) and its compile options; compiled kernels are cached per backend."""
    tree: object
    kernels: str = "auto"
    options: dict = field(default_factory=dict)
    compiled: dict = field(default_factory=dict)
    chosen: dict = field(default_factory=dict)      # device type -> backend name

    def kernel(self, device_type: str):
        import evt_core
        name = self.chosen.get(device_type)
        if name is None:   # resolved once: availability checks are far too slow per call
            name = self.chosen[device_type] = "numpy" if device_type == "cpu" else gpu_backend(self.kernels)
        if name not in self.compiled:
            opts = {} if name == "numpy" else self.options
            self.compiled[name] = evt_core.compile(self.tree, backend=name, **opts)
        return self.compiled[name]


def gpu_backend(kernels: str) -> str:
    """The GPU backend `kernels` names, or for "auto" the first available one."""
    if kernels == "numpy":
        raise BackendUnavailableError("kernels='numpy' runs only CPU tensors; these are CUDA tensors: "
                                      "pick 'auto', 'cupy' or 'numba_cuda'")
    if kernels != "auto":
        return kernels
    import evt_core
    support = evt_core.backends()
    for name in _GPU_PREFERENCE:
        if name in support and support[name]:
            return name
    why = "; ".join(f"{n}: {support[n].reason}" for n in _GPU_PREFERENCE if n in support)
    raise BackendUnavailableError(f"no GPU backend is available for CUDA tensors ({why or 'none registered'})")


def check_kernels(kernels, options: dict, where: str) -> None:
    """Raises ArgumentError (naming `where`'s argument) for a `kernels` no registered backend
    answers to, and the compile-option check (evt_core.api.check_options) for `options`
    against every GPU backend that `kernels` may pick: "auto" may pick any, so it takes only
    the options they share. Checked when a backend or op is made: found at the first CUDA call
    instead, a typo would run the graph unfused (with a warning), and on CPU tensors (always
    the NumPy backend, which takes no options) it would never be found."""
    from ..api import check_options
    from ..plugin.manager import plugins
    registry = plugins().registry
    names = registry.names()
    if kernels != "auto" and kernels not in names:
        raise ArgumentError(f"{where}(kernels={kernels!r}): no backend of that name is registered; "
                            f"pick 'auto' or one of {names}")
    pickable = [n for n in _GPU_PREFERENCE if n in names] if kernels == "auto" else [kernels]
    for name in sorted(options):
        takers = [n for n in names if name in registry.get(n).options]
        lacking = [n for n in pickable if n not in takers]
        if kernels == "auto" and lacking and takers:
            raise ArgumentError(f"{where}(kernels='auto', {name}=...): {name!r} is an option of "
                                f"{' and '.join(takers)} only, and 'auto' may pick {' or '.join(lacking)}; "
                                f"pass kernels={takers[0]!r} to use it")
    for backend in pickable:
        check_options(backend, registry.get(backend), options)


def register(tree, kernels: str = "auto", **options) -> str:
    """Register a traced tree; returns its key (the same tree and options give the same key)."""
    if getattr(tree, "program", None) is None:
        raise TraceError(f"expected a tree from evt_core.trace(...), got {type(tree).__name__}")
    check_kernels(kernels, options, "kernel_op")
    key = f"{tree.program.key()}:{kernels}:{sorted((k, repr(v)) for k, v in options.items())}"
    with _LOCK:
        _REGISTRY.setdefault(key, Entry(tree, kernels, dict(options)))
    return key


def entry(key: str) -> Entry:
    try:
        return _REGISTRY[key]
    except KeyError:
        raise TraceError(f"no evt kernel is registered under {key!r}; build it with "
                         "evt_core.torch.kernel_op(tree) in this process") from None


def output_specs(program, a_shape, b_shape):
    """[(shape, element strides, dtype name)] of the results, in `result_names` order, laid
    out exactly as `bind` allocates them (so fake and real tensors agree)."""
    a_shape, b_shape = tuple(a_shape), tuple(b_shape)
    if len(a_shape) not in (2, 3) or len(b_shape) not in (2, 3):
        raise ShapeError(f"A and B must be 2-D or 3-D, got {a_shape} and {b_shape}")
    L = max(a_shape[0] if len(a_shape) == 3 else 1, b_shape[0] if len(b_shape) == 3 else 1)
    ext = {"L": L, "M": a_shape[-2], "N": b_shape[-1]}
    by_name = {op.name: op for op in program.outputs}
    by_name.update({r.name: r.operand for r in program.reductions})
    specs = []
    for name in program.result_names:
        op = by_name[name]
        shape = expected_shape(op, ext)
        specs.append((shape, output_strides(op, shape), op.dtype))   # what bind allocates
    return specs


# ---- torch side ---------------------------------------------------------------------------
_DEFINED = []


def define():
    """Define torch.ops.evt.run once per process (importing torch only now)."""
    if _DEFINED:
        return _DEFINED[0]
    import torch

    # An explicit schema: this module postpones annotations, which infer_schema cannot read.
    @torch.library.custom_op("evt::run", mutates_args=(),
                             schema="(str key, Tensor A, Tensor B, Tensor[] inputs, float[] scalars) -> Tensor[]")
    def run(key, A, B, inputs, scalars):
        return _run(key, A, B, inputs, scalars)

    @run.register_fake
    def _(key, A, B, inputs, scalars):
        program = entry(key).tree.program
        return [torch.empty_strided(s, st, dtype=_torch_dtype(dt), device=A.device)
                for s, st, dt in output_specs(program, A.shape, B.shape)]

    _DEFINED.append(torch.ops.evt.run.default)
    return _DEFINED[0]


def _torch_dtype(name):
    import torch
    return {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[name]


def _call_args(program, inputs, scalars):
    names = [op.name for op in program.inputs]
    if len(inputs) != len(names) or len(scalars) != len(program.scalars):
        raise ShapeError(f"the kernel takes inputs {names} and scalars {list(program.scalars)}; got "
                         f"{len(inputs)} tensors and {len(scalars)} scalars")
    return dict(zip(names, inputs)), dict(zip(program.scalars, scalars))


def _run(key, A, B, inputs, scalars):
    import torch
    e = entry(key)
    program = e.tree.program
    tensors, scal = _call_args(program, list(inputs), list(scalars))
    if A.device.type == "cpu":
        specs = output_specs(program, A.shape, B.shape)
        kernel = e.kernel("cpu")
        out = kernel(_to_numpy(A), _to_numpy(B), **{k: _to_numpy(v) for k, v in tensors.items()}, **scal)
        results = []
        for name, (shape, strides, dt) in zip(program.result_names, specs):
            t = torch.empty_strided(shape, strides, dtype=_torch_dtype(dt))
            t.copy_(_from_numpy(np.asarray(out[name]).reshape(shape)))
            results.append(t)
        return results
    kernel = e.kernel(A.device.type)
    if kernel.backend == "cupy" and not _tma_reads_m_major(A, e.options):
        A = k_contiguous(A)
    with _caller_stream(kernel.backend, A.device, torch):
        out = kernel(A, B, **tensors, **scal)
    return [out[name] for name in program.result_names]


def _tma_reads_m_major(A, options):
    """Whether cupy's sm90 kernel takes this A as it is: K-major A always; M-major A by TMA
    panels (option a_mn_major_tma, on by default) when its K rows are 16-byte aligned (TMA's
    rule). Off sm_90 such an A takes per-element loads, so it is copied there too."""
    import torch
    if A.shape[-1] <= 1 or A.stride(-1) == 1:
        return True
    if torch.cuda.get_device_capability(A.device)[0] != 9:
        return False
    from evt_backends.cupy.backend import CupyBackend
    from evt_backends.cupy.select import a_layout
    strides = (A.stride(0) if A.dim() == 3 else 0, A.stride(-2), A.stride(-1))
    kmajor, tma = a_layout(strides, A.data_ptr(), A.element_size(),
                           options.get("a_mn_major_tma", CupyBackend.options["a_mn_major_tma"]))
    return not kmajor and tma


def k_contiguous(A):
    """A with unit stride along K, for the cupy backend where its fast mainloops cannot read A
    as it is (`_tma_reads_m_major`). Per-element loads of an M-major A, which is what a weight
    gradient's transposed activations are, made the 4 fused groups of a BERT-Large fp16
    training step take 5.6 ms; 0.84 ms plus ~0.54 ms of copies with this copy; with sm90's TMA
    panels instead, one ~100 µs copy per step fewer (bench/RESULTS-train.md, run 16). The numba
    backend's tensor-core kernel reads both A layouts, so it gets A as it is. The copy costs one
    read and one write of A on the caller's stream, through torch's allocator (CUDA graphs
    capture it)."""
    return A if A.shape[-1] <= 1 or A.stride(-1) == 1 else A.contiguous()


@contextmanager
def _caller_stream(backend, device, torch):
    """Make the backend launch on torch's current stream of `device` (CuPy reads its own
    current device and stream; the Numba backend reads evt's stream hook)."""
    ptr = torch.cuda.current_stream(device).cuda_stream
    with ExitStack() as stack:
        stack.enter_context(torch.cuda.device(device))
        if backend == "cupy":
            import cupy
            stack.enter_context(cupy.cuda.Device(device.index if device.index is not None else 0))
            stack.enter_context(cupy.cuda.ExternalStream(ptr))
        elif backend == "numba_cuda":
            from evt_backends.numba_cuda.runtime import driver
            stack.enter_context(driver.on_stream(ptr))
        yield


def _to_numpy(t):
    import torch
    t = t.detach()
    if t.dtype == torch.bfloat16:
        return t.contiguous().view(torch.int16).numpy().view(bfloat16)
    return t.numpy()


def _from_numpy(a):
    import torch
    a = np.require(a, requirements="C")     # not ascontiguousarray: it makes a 0-d result 1-d
    if a.dtype == bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    if a.dtype not in (DTYPES["float32"], DTYPES["float16"]):
        raise ShapeError(f"a NumPy kernel returned dtype {a.dtype}")
    return torch.from_numpy(a)


def kernel_op(tree, kernels: str = "auto", **options):
    """The torch callable of a traced tree: `f(A, B, **inputs) -> {name: tensor}`, running
    `torch.ops.evt.run` (works in eager mode, under torch.compile and in CUDA graphs)."""
    op = define()
    key = register(tree, kernels, **options)
    program = tree.program

    def call(A, B, **inputs):
        tensors, scal = [], []
        for p in program.inputs:
            if p.name not in inputs:
                raise ShapeError(f"missing input {p.name!r}: pass it as f(A, B, {p.name}=...)")
            tensors.append(inputs[p.name])
        for s in program.scalars:
            if s not in inputs:
                raise ShapeError(f"missing scalar {s!r}: pass it as f(A, B, {s}=0.5)")
            scal.append(float(inputs[s]))
        extra = set(inputs) - {p.name for p in program.inputs} - set(program.scalars)
        if extra:
            raise ShapeError(f"unexpected input {sorted(extra)[0]!r}; the kernel takes "
                             f"{[p.name for p in program.inputs] + list(program.scalars)}")
        return dict(zip(program.result_names, op(key, A, B, tensors, scal)))
    call.key = key
    return call
