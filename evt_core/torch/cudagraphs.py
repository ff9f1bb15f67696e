"""`backend(cudagraphs=True)`: run the rewritten forward and backward graphs under torch's
CUDA graph trees, the way torch._dynamo's own "cudagraphs" backend wraps plain aot graphs
(same helpers, same skip rules: a graph with CPU tensors or an unsafe op runs without).

The evt op qualifies for capture: it launches on the current stream, allocates its results
through torch, and never synchronises. Kernels are compiled when the graphs are rewritten,
before the first (warm-up) run, so capture never sees a compile."""
from __future__ import annotations


class CudaGraphs:
    """The forward/backward wrappers of one compiled graph (shared state: whether the
    forward was captured, and on which device)."""

    def __init__(self, n_dynamo_inputs: int):
        self.n_inputs, self.enabled, self.device = n_dynamo_inputs, True, None

    def forward(self, gm, inputs, is_inference=False):
        from torch._dynamo.backends.cudagraphs import check_for_skip, get_device_index
        from torch._functorch.aot_autograd import make_boxed_func
        from torch._inductor.utils import num_fw_fixed_arguments
        fixed = num_fw_fixed_arguments(self.n_inputs, len(inputs))
        if check_for_skip(gm, fixed):
            self.enabled = False
            return make_boxed_func(gm)
        self.device = get_device_index(gm)
        return self._capture(gm, inputs, fixed, is_backward=False, is_inference=is_inference)

    def backward(self, gm, inputs):
        from torch._dynamo.backends.cudagraphs import check_for_skip
        from torch._functorch.aot_autograd import make_boxed_func
        from torch._inductor.utils import count_tangents
        if not self.enabled:
            return make_boxed_func(gm)
        fixed = count_tangents(gm)
        if check_for_skip(gm, fixed):
            return uncaptured_backward(gm, self.device)
        return self._capture(gm, inputs, fixed, is_backward=True, is_inference=False)

    def _capture(self, gm, inputs, fixed, is_backward, is_inference):
        from torch._dynamo.backends.cudagraphs import find_input_mutations, get_device_index, get_stack_traces
        from torch._dynamo.backends.debugging import boxed_nop
        from torch._inductor.cudagraph_trees import cudagraphify_impl
        from torch._inductor.cudagraph_utils import get_placeholder_info
        out = cudagraphify_impl(boxed_nop(gm, inputs), inputs, range(fixed), device_index=get_device_index(gm),
                                is_backward=is_backward, is_inference=is_inference,
                                stack_traces=get_stack_traces(gm), placeholders=get_placeholder_info(gm.graph),
                                mutated_input_idxs=find_input_mutations(gm.graph))
        out._boxed_call = True
        return out


def uncaptured_backward(gm, device):
    """A backward that runs outside the CUDA-graph tree its forward ran in: it must tell the
    tree's manager that it runs, or the tree takes the next forward for a new generation."""
    from torch._functorch.aot_autograd import make_boxed_func
    from torch._inductor.cudagraph_trees import get_manager
    manager = get_manager(device or 0, create_if_none_exists=False)
    boxed = make_boxed_func(gm)

    def run(args):
        if manager is not None:
            manager.set_to_running_backward()
        return boxed(args)
    run._boxed_call = True
    return run
