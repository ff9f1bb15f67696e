"""The things the benchmark times for one (workload, shape): cuBLAS alone, eager PyTorch,
torch.compile, and each evt GPU backend's fused kernel. Every candidate is checked against the
fp32 reference before it may be timed; one that cannot be built or is wrong keeps a row with the
reason. GPU only: imports torch.
"""
import os
import re
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from .checks import check_outputs

COMPILE_MODE = "max-autotune-no-cudagraphs"
# Every shape traces at this (M, N): the Program (and so the compile-cache key) is then the same
# at every shape, as when a user traces once and calls at many sizes; only the backends' own
# per-shape choices (autotuning, layout variants) happen again.
TRACE_MN = (256, 512)


@dataclass
class Candidate:
    """One row of the table. `fn` is the zero-argument callable that is timed (None: not timed).
    mode: 'call' = kernel(A, B, **inputs) as users call it; 'launch' = the backend's pre-bound
    launch on preallocated outputs (pure kernel time); 'library' = a PyTorch baseline."""
    name: str
    mode: str
    fn: Optional[Callable] = None
    status: str = "ok"            # ok | wrong | unavailable | compile-failed | error | skipped
    reason: str = ""
    errors: dict = field(default_factory=dict)
    compile_s: Optional[float] = None
    round_us: list = field(default_factory=list)
    wall_us: Optional[float] = None
    note: str = ""
    kernel: str = ""              # what an evt call ran: kernel_choice of its kernel

    def fail(self, status, reason):
        self.status, self.reason, self.fn = status, reason, None
        return self

    def to_json(self):
        return {k: getattr(self, k) for k in ("name", "mode", "status", "reason", "errors", "compile_s",
                                              "round_us", "wall_us", "note", "kernel")}


def kernel_choice(kernel):
    """The tile and schedule an evt call ran, from its kernel's stages (its last call's):
    cupy's fast-path summary ("mainloop sm90, tile 128x128x64/w2x4/s6/pp"), numba's sm90
    note cut to the tile and schedule, or why numba fell back; "" where neither is recorded."""
    stages = getattr(kernel, "stages", None) or {}
    if stages.get("fast_paths"):
        return stages["fast_paths"].splitlines()[0]
    note = stages.get("sm90") or ""
    if note.startswith("fallback"):
        return note.split(":")[0]
    tile = re.search(r"tile \d+x\d+x\d+", note)
    schedule = re.search(r"(?:overlapped )?[\w-]+ schedule", note)
    return ", ".join(m.group(0) for m in (tile, schedule) if m)


def _short(exc, limit=300):
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[:limit] + "..."


def _sync():
    torch.cuda.synchronize()


class Case:
    """Inputs, fp32 reference and candidates for one workload at one shape."""

    def __init__(self, workload, shape, seed=0):
        self.workload, self.shape = workload, shape
        M, N, K = shape
        self.A, self.B, self.aux = workload.torch_inputs(M, N, K, seed=seed)
        self.reference = self._reference()
        self.gemm_reference = {"acc": self._acc32}
        self.candidates = []

    def _reference(self):
        """fp32 GEMM (TF32 off) of the same fp16 inputs, fp32 epilogue: the semantics the fused
        kernels implement, before their final rounding."""
        tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = False
        try:
            self._acc32 = self.A.float() @ self.B.float()
        finally:
            torch.backends.cuda.matmul.allow_tf32 = tf32
        aux32 = {k: v.float() for k, v in self.aux.items()}
        return {k: v.float() for k, v in self.workload.torch_epilogue(self._acc32, **aux32).items()}

    def add(self, candidate, outputs_fn=None, reference=None):
        """Check `candidate` (running `outputs_fn` once, or its own fn) and keep it."""
        self.candidates.append(candidate)
        if candidate.fn is None:
            return candidate
        try:
            outputs = (outputs_fn or candidate.fn)()
            _sync()
        except Exception as e:  # noqa: BLE001 - a broken candidate is reported, never fatal
            return candidate.fail("error", f"first call raised {_short(e)} at {_last_frame(e)}")
        return self._judge(candidate, outputs, reference)

    def _judge(self, candidate, outputs, reference=None):
        why, candidate.errors = check_outputs(outputs, reference or self.reference, _to_float32)
        if why:
            candidate.fail("wrong", why)
        return candidate

    # --- PyTorch baselines ------------------------------------------------------------------

    def add_torch_baselines(self, compile_allowed, skip_reason=""):
        A, B, aux, epi = self.A, self.B, self.aux, self.workload.torch_epilogue
        self.add(Candidate("cuBLAS", "library", lambda: torch.matmul(A, B), note="bare GEMM, the limit"),
                 outputs_fn=lambda: {"acc": torch.matmul(A, B)}, reference=self.gemm_reference)
        self.add(Candidate("eager", "library", lambda: epi(torch.matmul(A, B), **aux),
                           note="torch.matmul, then the epilogue ops unfused"))
        if not compile_allowed:
            self.candidates.append(Candidate("torch.compile", "library").fail("skipped", skip_reason))
            return
        self.add(self._compiled())

    def _compiled(self):
        A, B, aux, epi = self.A, self.B, self.aux, self.workload.torch_epilogue
        cand = Candidate("torch.compile", "library", note=f"mode={COMPILE_MODE}")
        # Every case compiles the same Python function; resetting dynamo keeps each case's
        # compile independent of the recompile limit (earlier cases are already timed).
        torch._dynamo.reset()

        def unfused(A, B, **aux):
            return epi(torch.matmul(A, B), **aux)
        try:
            compiled = torch.compile(unfused, mode=COMPILE_MODE, dynamic=False)
            t0 = time.perf_counter()
            compiled(A, B, **aux)
            _sync()
            cand.compile_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            return cand.fail("compile-failed", _short(e))
        cand.fn = lambda: compiled(A, B, **aux)
        return cand

    # --- evt backends -----------------------------------------------------------------------

    def add_evt_backend(self, name, support):
        """Trace, compile and check backend `name`; adds a 'call' row and, when the kernel offers
        a pre-bound launch, a 'launch' row."""
        import evt_core
        from evt_core.errors import EvtError

        from .run import split_spec
        backend, options = split_spec(name)
        call = Candidate(name, "call")
        if not support:
            self.candidates.append(call.fail("unavailable", getattr(support, "reason", "") or "not available"))
            return
        try:
            tree = evt_core.trace(self.workload.epilogue, self.workload.example(*TRACE_MN))
            t0 = time.perf_counter()
            kernel = evt_core.compile(tree, backend=backend, **options)
            call.compile_s = time.perf_counter() - t0
        except EvtError as e:
            self.candidates.append(call.fail("compile-failed", _short(e)))
            return
        except Exception as e:  # noqa: BLE001 - a backend bug must not stop the benchmark
            self.candidates.append(call.fail("compile-failed", f"{_short(e)} (not a typed EvtError: backend bug) "
                                             f"at {_last_frame(e)}"))
            return
        t0 = time.perf_counter()
        args = self._device_args(kernel, call)
        if args is None:
            self.candidates.append(call)
            return
        A, B, aux, kind, outputs = args
        call.note = f"{kind} arrays in and out; first call {time.perf_counter() - t0:.1f} s (lazy JIT)"
        call.kernel = kernel_choice(kernel)
        call.fn = lambda: kernel(A, B, **aux)
        self.candidates.append(self._judge(call, outputs))
        try:
            launch = find_launch(kernel, A, B, aux)
        except Exception as e:  # noqa: BLE001
            self.candidates.append(Candidate(name, "launch").fail("error", f"prepare raised {_short(e)}"))
            return
        if launch is not None:
            fn, outputs, how = launch
            cand = Candidate(name, "launch", fn, note=f"{how}, outputs preallocated")
            self.add(cand, outputs_fn=lambda: _poison_then(fn, outputs))

    def _device_args(self, kernel, call):
        """Zero-copy views of the torch inputs in the first array type (ARRAY_ORDER) the backend
        accepts, with the outputs of that first (poisoned) call; a type it refuses raises a typed
        error or TypeError, and the next is tried."""
        from evt_core.errors import DTypeError, ShapeError, UnsupportedError
        tried = []
        for kind in ARRAY_ORDER:
            try:
                wrap = ARRAY_VIEWS[kind]
                A, B = wrap(self.A), wrap(self.B)
                aux = {k: wrap(v) for k, v in self.aux.items()}
                outputs = _poisoned(lambda: kernel(A, B, **aux))   # may JIT-compile on first use
                _sync()
                return A, B, aux, kind, outputs
            except (DTypeError, ShapeError, UnsupportedError, TypeError, ImportError) as e:
                tried.append(f"{kind}: {_short(e, 150)}")
            except Exception as e:  # noqa: BLE001
                call.fail("error", f"first call with {kind} arrays raised {_short(e)} at {_last_frame(e)}")
                return None
        call.fail("error", "no array type accepted: " + " | ".join(tried))
        return None


def _last_frame(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"


def _poisoned(fn):
    """Run fn with EVT_POISON=1: bind fills outputs with NaN first, so unwritten elements and
    uninitialised reductions fail the check. Timing runs without it."""
    old = os.environ.get("EVT_POISON")
    os.environ["EVT_POISON"] = "1"
    try:
        return fn()
    finally:
        if old is None:
            del os.environ["EVT_POISON"]
        else:
            os.environ["EVT_POISON"] = old


def _poison_then(launch, outputs):
    """NaN-fill the preallocated outputs, launch, return them: what EVT_POISON does for calls."""
    for x in outputs.values():
        torch.as_tensor(x, device="cuda").fill_(float("nan"))
    launch()
    return outputs


def _to_float32(x):
    if not isinstance(x, torch.Tensor):
        x = torch.as_tensor(x, device="cuda")      # __cuda_array_interface__: no copy
    return x.float()


def _cupy_view(t):
    import cupy
    return cupy.from_dlpack(t)


def _numba_view(t):
    import numpy as np
    if not hasattr(np, "row_stack"):               # numba-cuda 0.30.4 still calls it (NumPy 2.5 removed it)
        np.row_stack = np.vstack
    from numba import cuda
    return cuda.as_cuda_array(t)


# Zero-copy views of the torch inputs. Both GPU backends take torch tensors directly (results
# come back as torch tensors); the others are fallbacks for a backend that refuses torch.
ARRAY_VIEWS = {"torch": lambda t: t, "cupy": _cupy_view, "numba": _numba_view}
ARRAY_ORDER = ("torch", "cupy", "numba")


def find_launch(kernel, A, B, aux):
    """The backend's pure-launch path, if it has one: (zero-arg fn, outputs dict, description).
    Protocol: `prepare(A, B, **inputs)` on the Kernel or on its `run` object, returning an
    object with `launch()` (one launch sequence on the bound arrays: main kernel plus any
    reduction init/finish, no binding or allocation) and `result` (the output dict it writes)."""
    for owner, where in ((kernel, "kernel"), (getattr(kernel, "run", None), "kernel.run")):
        make = getattr(owner, "prepare", None)
        if not callable(make):
            continue
        bound = make(A, B, **aux)
        launch, outputs = getattr(bound, "launch", None), getattr(bound, "result", None)
        if callable(launch) and isinstance(outputs, dict):
            return launch, outputs, f"{where}.prepare(...).launch()"
    return None
