"""runtime/arrays.py without a GPU: a repeated call's output maker keeps the device of the
recorded call's A, never the tensor (CUDA-graph trees refuse a pool allocation that outlives
the graph's outputs, tests/gpu/test_torch.py::test_mlp_trains_like_eager_fp16[cupy-True])."""
import gc
import weakref

import torch

from evt_backends.cupy.runtime.arrays import OutputMaker


def test_output_maker_does_not_keep_the_recorded_a_alive():
    A = torch.empty(4, 4)
    alive = weakref.ref(A)
    maker = OutputMaker("torch", A, [((4, 2), "float32", (2, 1))])
    del A
    gc.collect()
    assert alive() is None
    ptrs, (out,) = maker.make(poison=True)
    assert out.shape == (4, 2) and out.device.type == "cpu" and bool(out.isnan().all())
