"""The torch.compile backend: aot_autograd with an evt partition_fn.

aot_autograd traces forward and backward into one joint graph and hands it to the
partition_fn. Ours plans that joint graph (import, EVT graph passes, partitioner, one kernel
per GEMM group: `planning.py`) and then lets torch's default partitioner split it into the
forward and backward graphs, which keeps aot_autograd's calling conventions (saved tensors,
symints, RNG state) torch's own; both halves keep the joint graph's node names, so the fw/bw
compilers put each fused group into the half that computes it (`rewrite.py`). Graphs without
a backward (inference) are planned in the inference compiler instead."""
from __future__ import annotations

import copy
import threading
import warnings

from ..errors import ArgumentError, EvtError
from .report import Report

# How the ops outside evt kernels run: "torch" (the graph's ATen ops, one kernel each),
# "inductor" (compiled by TorchInductor around the evt ops: inductor.py), "auto" (inductor for
# CUDA graphs where it is available, torch ops on the CPU, where it would only cost compile time)
REST = ("auto", "inductor", "torch")
BARE_GEMMS = ("evt", "torch")

_REPORTS: list[Report] = []
_LOCK = threading.Lock()


class EvtBackend:
    """A torch.compile backend (see `evt_core.torch.backend`)."""

    def __init__(self, kernels: str = "auto", passes: bool = True, solver: str = "bnb",
                 time_limit: float | None = 30.0, strict: bool = False, cudagraphs: bool = False,
                 rebatch: bool = False, uturn: bool = True, rest: str = "auto", partitioner: str = "auto",
                 bare_gemms: str = "evt", **kernel_options):
        from ..partition.driver import SOLVERS
        from .ops import check_kernels
        from .saving import PARTITIONERS
        check_kernels(kernels, kernel_options, "backend")
        if solver not in SOLVERS:
            raise ArgumentError(f"backend(solver={solver!r}): pick one of {sorted(SOLVERS)} (how the partitioner "
                                "searches: evt_core/partition)")
        if time_limit is not None and (type(time_limit) not in (int, float) or not time_limit > 0):
            raise ArgumentError(f"backend(time_limit={time_limit!r}): pass None or a positive number of seconds "
                                "(the partitioner's limit per graph)")
        for flag, value in (("passes", passes), ("strict", strict), ("cudagraphs", cudagraphs),
                            ("rebatch", rebatch), ("uturn", uturn)):
            if not isinstance(value, bool):
                raise ArgumentError(f"backend({flag}={value!r}): pass True or False")
        if rest not in REST:
            raise ArgumentError(f"backend(rest={rest!r}): pick one of {REST} (how the ops outside evt kernels run)")
        if partitioner not in PARTITIONERS:
            raise ArgumentError(f"backend(partitioner={partitioner!r}): pick one of {PARTITIONERS} (how the "
                                "joint graph is split into forward and backward: evt_core/torch/saving.py)")
        if bare_gemms not in BARE_GEMMS:
            raise ArgumentError(f"backend(bare_gemms={bare_gemms!r}): pick one of {BARE_GEMMS} (what runs a GEMM "
                                "group with nothing to fuse on a GPU: evt kernels or cuBLAS through torch)")
        self.partitioner, self.bare_gemms = partitioner, bare_gemms
        self.kernels, self.passes, self.solver, self.rebatch = kernels, passes, solver, rebatch
        self.uturn, self.rest = uturn, rest
        self.time_limit, self.strict, self.kernel_options = time_limit, strict, kernel_options
        self.cudagraphs = cudagraphs

    def __call__(self, gm, example_inputs):
        from torch._dynamo.backends.common import aot_autograd
        c = _Compilation(self, example_inputs)
        extra = {}
        if c.decompose:
            from .saving import decompositions
            extra["decompositions"] = decompositions()
        return aot_autograd(fw_compiler=c.forward, bw_compiler=c.backward, inference_compiler=c.inference,
                            partition_fn=c.partition, **extra)(gm, example_inputs)

    def __repr__(self) -> str:
        return (f"evt_core.torch.backend(kernels={self.kernels!r}, passes={self.passes}, cudagraphs={self.cudagraphs}, "
                f"rest={self.rest!r}, partitioner={self.partitioner!r})")


class _Compilation:
    """The state of one compiled graph: its plan and its report."""

    def __init__(self, be: EvtBackend, example_inputs):
        from .cudagraphs import CudaGraphs
        from .inductor import choose
        self.be, self.joint, self.n_inputs = be, None, len(example_inputs)
        self.graphs = CudaGraphs(self.n_inputs) if be.cudagraphs else None
        self.inductor = None      # InductorHalves once the first half chose inductor
        # backend(rest=...) resolved once for the graph's devices: ("inductor" | "torch", why not inductor)
        self.rest, self.rest_why = choose(be.rest, {x.device.type for x in example_inputs if hasattr(x, "device")})
        # the loss ops decomposed as inductor would, so the min-cut partitioner can save what
        # torch.compile saves (saving.py); only when inductor runs the rest, which compiles them
        self.decompose = be.partitioner == "min_cut" or be.partitioner == "auto" and self.rest == "inductor"
        with _LOCK:
            self.report = Report(f"graph {len(_REPORTS)}")
            _REPORTS.append(self.report)

    def _plan(self, gm, halves) -> None:
        from .planning import plan_graph
        self.report.pending = set(halves)
        try:
            self.joint = plan_graph(gm, self.be.passes, self.be.solver, self.be.time_limit,
                                    self.be.kernels, self.be.kernel_options, self.be.rebatch,
                                    fusing_rest=self.rest == "inductor", bare_gemms=self.be.bare_gemms)
        except Exception as err:  # noqa: BLE001 - training goes on unfused unless strict
            self._give_up(err)
            return
        self.report.plan = self.joint.plan
        self.report.refused.update(self.joint.refused)

    def _place(self, gm, half, example_inputs):
        from torch._functorch.aot_autograd import make_boxed_func
        from .rewrite import rewrite
        self.report.pending.discard(half)
        if self.joint is not None:
            # outside aot_autograd's fake mode: a tensor constant of the graph (torch.tensor(...)
            # in forward, y[:, :4] = 0) is a real tensor, which a fake-mode copy cannot hold
            from torch._subclasses.fake_tensor import unset_fake_temporarily
            with unset_fake_temporarily():
                original = copy.deepcopy(gm)
            try:
                placed, refused = rewrite(gm, self.joint)
            except Exception as err:  # noqa: BLE001 - as in _plan
                self._give_up(err)
                gm, placed, refused = original, [], {}
            self.report.fused = sorted(set(self.report.fused) | set(placed))
            self.report.placed.update({k: half for k in placed})
            for k, why in refused.items():
                self.report.refused.setdefault(k, why)
        if self._runs_inductor(half):
            try:
                if half == "backward":
                    return self.inductor.backward(gm, example_inputs)
                return self.inductor.forward(gm, example_inputs, is_inference=half == "inference")
            except Exception as err:  # noqa: BLE001 - the graph still runs, as torch ops
                if self.be.strict:
                    raise
                self.report.rest = f"torch (inductor failed on the {half} graph: {type(err).__name__}: {err})"
                warnings.warn(f"evt: {self.report.name}: {self.report.rest}", stacklevel=3)
                return self._inductor_fallback(gm, half)
        if self.graphs is None:
            return make_boxed_func(gm)
        if half == "backward":
            return self.graphs.backward(gm, example_inputs)
        return self.graphs.forward(gm, example_inputs, is_inference=half == "inference")

    def _runs_inductor(self, half) -> bool:
        """Whether inductor compiles this half: decided by the first half compiled (forward or
        inference) and kept for the backward, which shares its CUDA-graph state."""
        if half == "backward":
            return self.inductor is not None
        from .inductor import InductorHalves
        rest, why = self.rest, self.rest_why
        if why is not None and self.be.rest == "inductor" and self.be.strict:
            raise ArgumentError(f"backend(rest='inductor'): {why}")
        self.report.rest = rest if why is None else f"torch ({why})"
        if rest == "inductor":
            self.inductor = InductorHalves(self.n_inputs, self.be.cudagraphs)
        return rest == "inductor"

    def _inductor_fallback(self, gm, half):
        """A half inductor could not compile runs as its ATen ops (outside the CUDA-graph tree
        the forward may run in: cudagraphs.uncaptured_backward)."""
        from torch._functorch.aot_autograd import make_boxed_func
        if half != "backward" or not self.be.cudagraphs:
            return make_boxed_func(gm)
        from .cudagraphs import uncaptured_backward
        return uncaptured_backward(gm, self.inductor.device.value)

    def _give_up(self, err) -> None:
        """Planning or rewriting failed: raise if strict, else warn and run torch's graph.
        EvtErrors are expected refusals; anything else is a bug worth reporting."""
        if self.be.strict:
            raise err
        self.report.error = f"{type(err).__name__}: {err}"
        self.joint = None
        kind = "" if isinstance(err, EvtError) else " (a bug in evt: please report it)"
        warnings.warn(f"evt: {self.report.name} runs unfused{kind}: {self.report.error}", stacklevel=3)

    def partition(self, joint, joint_inputs, **kw):
        from . import saving
        from .uturn import pull_into_forward, sink_scalar_tangents
        how = saving.choose(self.be.partitioner, joint) if self.decompose else "default"
        if how == "min_cut":
            joint = saving.joint_graph_passes(joint)
        uturn = self.be.passes and self.be.uturn
        if uturn:
            sink_scalar_tangents(joint)
        self._plan(joint, ("forward", "backward"))
        if self.joint is not None and uturn:
            self.report.pulled = pull_into_forward(joint, self.joint)
        fw, bw, self.report.partitioner = saving.partition(joint, joint_inputs, self.joint, how, **kw)
        self.report.saved = saving.saved_values(fw, kw["num_fwd_outputs"])
        return fw, bw

    def forward(self, gm, example_inputs):
        return self._place(gm, "forward", example_inputs)

    def backward(self, gm, example_inputs):
        return self._place(gm, "backward", example_inputs)

    def inference(self, gm, example_inputs):
        self._plan(gm, ("inference",))
        return self._place(gm, "inference", example_inputs)


def reports() -> list[Report]:
    with _LOCK:
        return list(_REPORTS)


def clear_reports() -> None:
    with _LOCK:
        _REPORTS.clear()
