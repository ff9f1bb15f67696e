"""The op table: for every known ATen op its node class, its signature and its shape rule.

Semantics (NumPy) live in `numpy_ops.py`, keyed by the same names; the partitioner reads only
the class. Signatures are written as "self other dim: keepdim:" — a name ending in ':' is an
attribute, any other name a tensor operand (Python scalars there become constant nodes)."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Callable

from . import shapes as S


class Kind(Enum):
    INPUT = "input"          # graph input; not partitioned
    CONST = "const"          # compile-time constant; not partitioned
    ANCHOR = "anchor"        # a mainloop (GEMM, conv, softmax, layer norm): at most one per group
    ELEMENTWISE = "elementwise"  # fusible, including layout ops
    REDUCTION = "reduction"  # fusible, but its result is complete only outside its group
    OPAQUE = "opaque"        # unknown or library op: a group of its own


GEMMS = frozenset({"mm", "bmm", "addmm"})
# Layout ops a GEMM absorbs as operand strides when they feed it directly (design doc 4.6).
LAYOUT_INTO_GEMM = frozenset({"permute", "transpose", "t"})


@dataclass(frozen=True, slots=True)
class OpInfo:
    kind: Kind
    sig: tuple[str, ...]     # parameter names; attributes end with ':'
    infer: Callable          # (types: dict param -> TensorType, attrs: dict) -> tuple[TensorType]

    @property
    def tensor_params(self) -> tuple[str, ...]:
        return tuple(p for p in self.sig if not p.endswith(":"))


def _op(kind, sig, infer):
    return OpInfo(kind, tuple(sig.split()), infer)


_E, _R, _A, _O = Kind.ELEMENTWISE, Kind.REDUCTION, Kind.ANCHOR, Kind.OPAQUE
UNARY = ("neg", "relu", "tanh", "sigmoid", "exp", "log", "rsqrt", "sqrt", "abs", "reciprocal",
         "clone", "silu", "erf", "logical_not")
BINARY = ("add", "sub", "mul", "div", "maximum", "minimum", "rsub", "pow")
COMPARE = ("eq", "ne", "ge", "gt", "le", "lt")
REDUCE = ("sum", "amax", "amin", "mean")

OPS: dict[str, OpInfo] = {
    **{op: _op(_E, "self", S.same) for op in UNARY},
    "gelu": _op(_E, "self approximate:", S.same),
    **{op: _op(_E, "self other", S.elementwise) for op in BINARY},
    **{op: _op(_E, "self other", S.compare) for op in COMPARE},
    "where": _op(_E, "condition self other", S.where),
    "threshold_backward": _op(_E, "grad_output self threshold:", S.elementwise),
    "gelu_backward": _op(_E, "grad_output self approximate:", S.elementwise),
    "tanh_backward": _op(_E, "grad_output output", S.elementwise),
    "sigmoid_backward": _op(_E, "grad_output output", S.elementwise),
    "_to_copy": _op(_E, "self dtype:", S.to_dtype),
    "one_hot": _op(_E, "self num_classes:", S.one_hot),
    "nll_loss_backward": _op(_E, "grad_output self target weight: reduction: ignore_index: "
                                 "total_weight:", S.like_self),
    "permute": _op(_E, "self dims:", S.permute),
    "transpose": _op(_E, "self dim0: dim1:", S.transpose),
    "t": _op(_E, "self", S.t),
    "view": _op(_E, "self size:", S.view),
    "expand": _op(_E, "self size:", S.expand),
    "unsqueeze": _op(_E, "self dim:", S.unsqueeze),
    "squeeze": _op(_E, "self dim:", S.squeeze),
    "select": _op(_E, "self dim: index:", S.select),
    "select_backward": _op(_E, "grad_output input_sizes: dim: index:", S.select_backward),
    "getitem": _op(_E, "self index:", S.getitem),
    **{op: _op(_R, "self dim: keepdim:", S.reduce) for op in REDUCE},
    "nll_loss_forward": _op(_R, "self target weight: reduction: ignore_index:", S.nll_forward),
    "mm": _op(_A, "self mat2", S.mm),
    "bmm": _op(_A, "self mat2", S.bmm),
    "addmm": _op(_A, "self mat1 mat2 beta: alpha:", S.addmm),
    "_softmax": _op(_A, "self dim: half_to_float:", S.same),
    "_log_softmax": _op(_A, "self dim: half_to_float:", S.same),
    "_softmax_backward_data": _op(_A, "grad_output output dim: input_dtype:", S.same),
    "_log_softmax_backward_data": _op(_A, "grad_output output dim: input_dtype:", S.same),
    "native_layer_norm": _op(_A, "input normalized_shape: weight bias eps:", S.layer_norm),
    "native_layer_norm_backward": _op(_A, "grad_out input normalized_shape: mean rstd weight bias "
                                          "output_mask:", S.layer_norm_backward),
    "convolution": _op(_A, "input weight bias stride: padding: dilation: transposed: "
                           "output_padding: groups:", S.convolution),
    "convolution_backward": _op(_A, "grad_output input weight bias_sizes: stride: padding: "
                                    "dilation: transposed: output_padding: groups: output_mask:",
                                S.convolution_backward),
    "native_batch_norm": _op(_O, "input weight bias running_mean running_var training: "
                                 "momentum: eps:", S.batch_norm),
    "native_batch_norm_backward": _op(_O, "grad_out input weight running_mean running_var save_mean "
                                          "save_invstd train: eps: output_mask:", S.batch_norm_backward),
    "embedding": _op(_O, "weight indices", S.embedding),
    "full": _op(Kind.CONST, "size: fill_value: dtype:", S.full),
}
# Short spellings accepted on input and rewritten to the ATen name.
ALIASES = {"softmax": "_softmax", "log_softmax": "_log_softmax", "reshape": "view",
           "_unsafe_view": "view", "softmax_backward": "_softmax_backward_data",
           "log_softmax_backward": "_log_softmax_backward_data", "to": "_to_copy",
           "layer_norm": "native_layer_norm", "convolution_backward": "convolution_backward",
           "_safe_softmax": "_softmax"}   # softmax that maps all -inf rows to 0, not -nan
# Defaults filled in when the caller leaves an attribute out.
DEFAULTS = {"_softmax": {"half_to_float": False}, "_log_softmax": {"half_to_float": False},
            "addmm": {"beta": 1, "alpha": 1}, "gelu": {"approximate": "none"},
            "gelu_backward": {"approximate": "none"}, "nll_loss_forward": {"weight": None,
            "reduction": 1, "ignore_index": -100}, "threshold_backward": {"threshold": 0.0},
            **{op: {"dim": None, "keepdim": False} for op in REDUCE},
            "squeeze": {"dim": None}, "one_hot": {"num_classes": -1}}


def kind_of(op: str) -> Kind:
    if op == "input":
        return Kind.INPUT
    info = OPS.get(op)
    return info.kind if info else Kind.OPAQUE
