"""`backend(rest="inductor")`: the ops outside evt kernels compiled by TorchInductor.

After `rewrite`, a half is an fx graph of ATen ops with one `torch.ops.evt.run` call per fused
group. Run as it is, every other op (layer norms, residual adds, the bias gradients of groups
that stayed torch ops, the zero-fills and copies of aot_autograd's select and split backwards)
is a kernel of its own: over a third of a BERT-Large training step (bench/RESULTS-train.md).
Inductor fuses those ops into Triton kernels, as torch.compile does, and calls each evt op as
an extern kernel. The division of labour is the EVT paper's: evt owns every GEMM and its
epilogue, the graph compiler the rest.

Invariants:
- inductor compiles decomposed graphs only (its lowerings and its decomposition table must not
  both claim an op), so a half is retraced under inductor's decomposition table on the
  compilation's fake tensors first; the evt op traces through its fake implementation and
  stays one node, with the operands the plan chose;
- the evt op is a custom op, which inductor calls with its inputs in the strides of the traced
  graph (its default layout constraint for custom ops), so the strides the plan was made for
  are the strides the kernel sees;
- forward and backward share the CUDA-graph flag and the forward's device index, as in
  torch.compile's own pipeline; the parameters (forward) and the saved values (backward) are
  the static inputs of a captured graph.
"""
from __future__ import annotations

import itertools

_GRAPH_IDS = itertools.count()


class InductorHalves:
    """The forward/backward compilers of one graph when inductor runs the rest."""

    def __init__(self, n_dynamo_inputs: int, cudagraphs: bool):
        from torch._inductor.utils import BoxedBool
        from torch._inductor.cudagraph_utils import BoxedDeviceIndex
        self.n_inputs = n_dynamo_inputs
        self.cudagraphs = BoxedBool(cudagraphs)
        self.device = BoxedDeviceIndex(None)
        self.graph_id = next(_GRAPH_IDS)

    def forward(self, gm, inputs, is_inference=False):
        from torch._inductor.utils import num_fw_fixed_arguments
        fixed = num_fw_fixed_arguments(self.n_inputs, len(inputs))
        return self._compile(gm, inputs, fixed, is_backward=False, is_inference=is_inference)

    def backward(self, gm, inputs):
        from torch._inductor.utils import count_tangents
        return self._compile(gm, inputs, count_tangents(gm), is_backward=True, is_inference=False)

    def _compile(self, gm, inputs, fixed, is_backward, is_inference):
        from torch._inductor import config
        from torch._inductor.compile_fx import compile_fx_inner
        # The flag must be in inductor's config as well as in the call: with graph partitions
        # (torch >= 2.9) the scheduler reads the config, and with it off makes no capturable
        # partition, so the graph would run uncaptured (measured: BERT-Large 4.5 ms, not 2.7)
        with config.patch({"triton.cudagraphs": bool(self.cudagraphs)}):
            return compile_fx_inner(decomposed(gm, inputs), inputs, static_input_idxs=list(range(fixed)),
                                    cudagraphs=self.cudagraphs, graph_id=self.graph_id, is_backward=is_backward,
                                    is_inference=is_inference, boxed_forward_device_index=self.device)


def decomposed(gm, inputs):
    """`gm` retraced with inductor's decompositions (see the module's first invariant)."""
    import torch
    from torch._guards import detect_fake_mode
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx
    fake = detect_fake_mode(inputs)
    if fake is None:
        from torch._subclasses.fake_tensor import FakeTensorMode
        fake = FakeTensorMode(allow_non_fake_inputs=True)
    with fake:
        args = [fake.from_tensor(x) if isinstance(x, torch.Tensor) else x for x in inputs]
        return make_fx(gm, decomposition_table=select_decomp_table())(*args)


def choose(rest: str, device_types) -> tuple[str, str | None]:
    """What the backend option `rest` resolves to for graphs on these device types: ("inductor"
    or "torch", the reason inductor was wanted but cannot run, or None). "auto" wants inductor
    for CUDA graphs only."""
    if rest == "auto":
        rest = "inductor" if "cuda" in device_types else "torch"
    why = available(device_types) if rest == "inductor" else None
    return ("torch" if why else rest), why


def available(device_types) -> str | None:
    """None when inductor can compile graphs on these device types, else the reason."""
    try:     # everything InductorHalves and decomposed() import (older torch lacks some)
        from torch._inductor.compile_fx import compile_fx_inner  # noqa: F401
        from torch._inductor.cudagraph_utils import BoxedDeviceIndex  # noqa: F401
        from torch._inductor.decomposition import select_decomp_table  # noqa: F401
        from torch._inductor.utils import BoxedBool, count_tangents, num_fw_fixed_arguments  # noqa: F401
    except Exception as err:  # noqa: BLE001 - any import failure means: run torch ops
        return f"this torch's inductor lacks what evt uses ({type(err).__name__}: {err})"
    if "cuda" in device_types:
        try:
            import triton  # noqa: F401
        except ImportError:
            return "triton is not installed (inductor's CUDA kernels need it)"
    return None
