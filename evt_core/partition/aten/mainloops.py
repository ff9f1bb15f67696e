"""Mainloop (anchor), loss and library ATen ops: one record each. GEMMs become the tree's
accumulator (`lowering.group_tree`); the other anchors and the opaque library ops run with
NumPy and never become epilogue nodes, as their `tree` field says."""
from __future__ import annotations

import numpy as np

from .. import shapes as S
from . import kernels as K
from .record import Kind, op

_A, _O, _R, _E = Kind.ANCHOR, Kind.OPAQUE, Kind.REDUCTION, Kind.ELEMENTWISE
_ACCUM = "the GEMM becomes the epilogue's accumulator (ACCUM), not a node of its own"
_MAINLOOP = "a mainloop other than a GEMM: runs with NumPy, not as an evt_core kernel"
_LIBRARY = "a library op: a group of its own, run with NumPy"

op("mm", _A, "self mat2", S.mm, lambda self, mat2: self @ mat2, _ACCUM)
op("bmm", _A, "self mat2", S.bmm, lambda self, mat2: self @ mat2, _ACCUM)
op("addmm", _A, "self mat1 mat2 beta: alpha:", S.addmm,
   lambda self, mat1, mat2, beta=1, alpha=1: beta * self + alpha * (mat1 @ mat2), _ACCUM,
   defaults={"beta": 1, "alpha": 1})
op("_softmax", _A, "self dim: half_to_float:", S.along_dim, K.softmax, _MAINLOOP,
   defaults={"half_to_float": False}, aliases=("softmax", "_safe_softmax"))  # _safe: -inf rows -> 0
op("_log_softmax", _A, "self dim: half_to_float:", S.along_dim, K.log_softmax, _MAINLOOP,
   defaults={"half_to_float": False}, aliases=("log_softmax",))
op("_softmax_backward_data", _A, "grad_output output dim: input_dtype:", S.along_dim,
   lambda grad_output, output, dim, input_dtype=None:
       output * (grad_output - (grad_output * output).sum(axis=dim, keepdims=True)),
   _MAINLOOP, aliases=("softmax_backward",))
op("_log_softmax_backward_data", _A, "grad_output output dim: input_dtype:", S.along_dim,
   lambda grad_output, output, dim, input_dtype=None:
       grad_output - np.exp(output) * grad_output.sum(axis=dim, keepdims=True),
   _MAINLOOP, aliases=("log_softmax_backward",))
op("native_layer_norm", _A, "input normalized_shape: weight bias eps:", S.layer_norm,
   K.native_layer_norm, _MAINLOOP, aliases=("layer_norm",))
op("native_layer_norm_backward", _A, "grad_out input normalized_shape: mean rstd weight bias output_mask:",
   S.layer_norm_backward, K.native_layer_norm_backward, _MAINLOOP)
op("convolution", _A, "input weight bias stride: padding: dilation: transposed: output_padding: groups:",
   S.convolution, K.convolution, _MAINLOOP)
op("convolution_backward", _A, "grad_output input weight bias_sizes: stride: padding: dilation: "
   "transposed: output_padding: groups: output_mask:", S.convolution_backward, K.convolution_backward,
   _MAINLOOP)
op("nll_loss_forward", _R, "self target weight: reduction: ignore_index:", S.nll_forward,
   K.nll_loss_forward, "a gather by integer targets has no epilogue op",
   defaults={"weight": None, "reduction": 1, "ignore_index": -100})
op("nll_loss_backward", _E, "grad_output self target weight: reduction: ignore_index: total_weight:",
   S.like_self, K.nll_loss_backward, "a scatter by integer targets has no epilogue op")
op("native_batch_norm", _O, "input weight bias running_mean running_var training: momentum: eps:",
   S.batch_norm, K.native_batch_norm, _LIBRARY)
op("native_batch_norm_backward", _O, "grad_out input weight running_mean running_var save_mean "
   "save_invstd train: eps: output_mask:", S.batch_norm_backward, K.native_batch_norm_backward, _LIBRARY)
op("embedding", _O, "weight indices", S.embedding, lambda weight, indices: weight[indices], _LIBRARY)
