"""The four benchmark workloads, each spelled three ways over the same math.

  * `epilogue`: the evt epilogue function that `evt_core.trace` turns into ONE fused kernel.
  * `torch_epilogue(acc, **aux)`: the same math in PyTorch ops. Called on `torch.matmul(A, B)`
    in fp16 it is the unfused eager baseline (and what torch.compile sees); called on an fp32
    accumulator with fp32 aux it is the correctness reference.
  * `numpy_epilogue(acc, **aux)`: the same math written out in NumPy float32, independent of
    evt_core's op table, so CPU tests can check that the evt spelling means what we think.

All workloads: fp16 A (M, K) and B (K, N), fp32 accumulation, fp16 aux inputs and stored
tensors, fp32 reduction outputs. Nothing here imports torch at module level, so the CPU tests
(numpy backend only) can import it.
"""
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from evt_core import ops

# The three (M, N, K) problems every workload runs at: an FFN up-projection, its
# down-projection, and a square GEMM.
SHAPES = ((8192, 3072, 768), (8192, 768, 3072), (4096, 4096, 4096))

_GELU_K = math.sqrt(2.0 / math.pi)
_GELU_A = 0.044715


# --- the evt epilogues (what gets fused) ------------------------------------------------------

def forward_epilogue(accum, bias):
    """W1: z = A@B + bias; store z and gelu_tanh(z)."""
    z = accum + bias
    act = ops.gelu_tanh(z)
    return z, act


def backward_epilogue(accum, z):
    """W2: dx = (A@B) * gelu_tanh'(z); store dx and the bias gradient (column sums of dx)."""
    dx = accum * ops.gelu_tanh_grad(z)
    dbias = ops.sum(dx, over="M")
    return dx, dbias


def softmax_stats_epilogue(accum):
    """W3: s = 0.125 * A@B; store s and its row max (the first softmax statistic)."""
    s = 0.125 * accum
    s_rowmax = ops.amax(s, over="N")
    return s, s_rowmax


def layernorm_stats_epilogue(accum, bias, r):
    """W4: y = A@B + bias + r; store y and its row sums of y and y*y (layer-norm statistics)."""
    y = accum + bias + r
    y_sum = ops.sum(y, over="N")
    y_sqsum = ops.sum(y * y, over="N")
    return y, y_sum, y_sqsum


# --- the same math in PyTorch (eager baseline and reference) ----------------------------------

def forward_torch(acc, bias):
    import torch.nn.functional as F
    z = acc + bias
    return {"z": z, "act": F.gelu(z, approximate="tanh")}


def backward_torch(acc, z):
    import torch
    # aten.gelu_backward(grad, x) = grad * gelu'(x): what autograd runs in eager PyTorch.
    dx = torch.ops.aten.gelu_backward(acc, z, approximate="tanh")
    return {"dx": dx, "dbias": dx.sum(dim=-2, dtype=torch.float32)}


def softmax_stats_torch(acc):
    import torch
    s = acc * 0.125
    return {"s": s, "s_rowmax": s.amax(dim=-1).to(torch.float32)}


def layernorm_stats_torch(acc, bias, r):
    import torch
    y = acc + bias + r
    y32 = y.to(torch.float32)
    return {"y": y, "y_sum": y32.sum(dim=-1), "y_sqsum": (y32 * y32).sum(dim=-1)}


# --- the same math in NumPy float32, written out (CPU tests) ----------------------------------

def _gelu_tanh_np(x):
    return 0.5 * x * (1 + np.tanh(_GELU_K * (x + _GELU_A * x ** 3)))


def _gelu_tanh_grad_np(x):
    t = np.tanh(_GELU_K * (x + _GELU_A * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _GELU_K * (1 + 3 * _GELU_A * x * x)


def forward_numpy(acc, bias):
    z = acc + bias
    return {"z": z, "act": _gelu_tanh_np(z)}


def backward_numpy(acc, z):
    dx = acc * _gelu_tanh_grad_np(z)
    return {"dx": dx, "dbias": dx.sum(axis=-2)}


def softmax_stats_numpy(acc):
    s = 0.125 * acc
    return {"s": s, "s_rowmax": s.max(axis=-1)}


def layernorm_stats_numpy(acc, bias, r):
    y = acc + bias + r
    return {"y": y, "y_sum": y.sum(axis=-1), "y_sqsum": (y * y).sum(axis=-1)}


# --- the workload table ----------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    """One benchmark epilogue. `aux` and `outputs` map names to (axes, dtype): axes is a string
    over "MN" giving the tensor's dims in order ("N" is a bias row, "MN" a full matrix)."""
    key: str
    title: str
    epilogue: Callable
    torch_epilogue: Callable
    numpy_epilogue: Callable
    aux: dict
    outputs: dict

    def extents(self, axes, M, N):
        return tuple({"M": M, "N": N}[a] for a in axes)

    def example(self, M, N):
        """The `evt_core.trace` example dict: accum, aux inputs and outputs at (M, N)."""
        ex = {"accum": np.empty((M, N), np.float32)}
        for name, (axes, dtype) in {**self.aux, **self.outputs}.items():
            ex[name] = np.empty(self.extents(axes, M, N), dtype)
        return ex

    def numpy_inputs(self, M, N, K, seed=0):
        """fp16 A, B and aux as NumPy arrays; see `_scaled_normal` for the value ranges."""
        rng = np.random.default_rng(seed)
        A = _scaled_normal(rng.standard_normal, (M, K), 1.0)
        B = _scaled_normal(rng.standard_normal, (K, N), 1.0 / math.sqrt(K))
        aux = {name: _scaled_normal(rng.standard_normal, self.extents(axes, M, N), AUX_SCALE)
               for name, (axes, _) in self.aux.items()}
        return A, B, aux

    def torch_inputs(self, M, N, K, seed=0, device="cuda"):
        """The same distributions as `numpy_inputs`, drawn on the GPU with torch."""
        import torch
        gen = torch.Generator(device=device).manual_seed(seed)

        def normal(shape, scale):
            return (torch.randn(shape, generator=gen, device=device) * scale).to(torch.float16)
        A = normal((M, K), 1.0)
        B = normal((K, N), 1.0 / math.sqrt(K))
        aux = {name: normal(self.extents(axes, M, N), AUX_SCALE) for name, (axes, _) in self.aux.items()}
        return A, B, aux

    def flops(self, M, N, K):
        """GEMM flops only (2MNK): the epilogue is O(MN) and the table compares against cuBLAS."""
        return 2.0 * M * N * K


# Aux values of order one, like the activations and gradients these epilogues see in training;
# B is scaled by 1/sqrt(K) so the accumulator is of order one too, where gelu is not linear.
AUX_SCALE = 1.0


def _scaled_normal(draw, shape, scale):
    return (draw(shape, dtype=np.float32) * np.float32(scale)).astype(np.float16)


F16, F32 = "float16", "float32"
WORKLOADS = {
    w.key: w for w in (
        Workload("W1", "forward: z = A@B + bias; z, gelu_tanh(z)",
                 forward_epilogue, forward_torch, forward_numpy,
                 aux={"bias": ("N", F16)}, outputs={"z": ("MN", F16), "act": ("MN", F16)}),
        Workload("W2", "backward: dx = A@B * gelu_tanh'(z); dx, dbias = colsum(dx)",
                 backward_epilogue, backward_torch, backward_numpy,
                 aux={"z": ("MN", F16)}, outputs={"dx": ("MN", F16), "dbias": ("N", F32)}),
        Workload("W3", "softmax stats: s = 0.125 A@B; s, rowmax(s)",
                 softmax_stats_epilogue, softmax_stats_torch, softmax_stats_numpy,
                 aux={}, outputs={"s": ("MN", F16), "s_rowmax": ("M", F32)}),
        Workload("W4", "layer-norm stats: y = A@B + bias + r; y, rowsum(y), rowsum(y^2)",
                 layernorm_stats_epilogue, layernorm_stats_torch, layernorm_stats_numpy,
                 aux={"bias": ("N", F16), "r": ("MN", F16)},
                 outputs={"y": ("MN", F16), "y_sum": ("M", F32), "y_sqsum": ("M", F32)}),
    )
}


def parse_shape(text):
    """'8192x3072x768' -> (8192, 3072, 768), for --shapes."""
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise ValueError(f"shape {text!r} is not MxNxK with positive integers, e.g. 8192x3072x768")
    return tuple(int(p) for p in parts)
