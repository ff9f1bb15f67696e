"""NumPy semantics of the known ops: the one definition the reference evaluator, the NumPy
groups of `run` and constant propagation all use. Operands arrive by parameter name, float
tensors already widened to float32; the evaluator rounds each result to the node's dtype."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .shapes import dims_of, view_shape

_SQRT_2_OVER_PI = 0.7978845608028654


def erf(x):
    # Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7, fine against fp16/fp32), no SciPy needed.
    s, a = np.sign(x), np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t
               + 0.254829592) * t * np.exp(-a * a)
    return (s * y).astype(np.result_type(x, np.float32), copy=False)


def gelu(self, approximate="none"):
    if approximate == "tanh":
        return 0.5 * self * (1 + np.tanh(_SQRT_2_OVER_PI * (self + 0.044715 * self ** 3)))
    return 0.5 * self * (1 + erf(self / np.sqrt(np.float32(2))))


def gelu_backward(grad_output, self, approximate="none"):
    x = self
    if approximate == "tanh":
        inner = _SQRT_2_OVER_PI * (x + 0.044715 * x ** 3)
        th = np.tanh(inner)
        d = 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x)
    else:
        d = 0.5 * (1 + erf(x / np.sqrt(np.float32(2)))) + x * np.exp(-0.5 * x * x) / np.sqrt(2 * np.pi)
    return grad_output * d


def _reduce(fn):
    def run(self, dim=None, keepdim=False):
        return fn(self, axis=dims_of(dim, self.ndim), keepdims=keepdim)
    return run


def _softmax(self, dim, half_to_float=False):
    e = np.exp(self - self.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def _log_softmax(self, dim, half_to_float=False):
    s = self - self.max(axis=dim, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=dim, keepdims=True))


def _valid(target, ignore_index):
    return target != ignore_index, np.where(target == ignore_index, 0, target)


def nll_loss_forward(self, target, weight=None, reduction=1, ignore_index=-100):
    valid, t = _valid(target, ignore_index)
    picked = -np.take_along_axis(self, t[..., None], axis=-1)[..., 0] * valid
    if reduction == 0:
        return picked
    return picked.sum() / (max(valid.sum(), 1) if reduction == 1 else 1)


def nll_loss_backward(grad_output, self, target, weight=None, reduction=1, ignore_index=-100,
                      total_weight=None):
    valid, t = _valid(target, ignore_index)
    g = grad_output / (max(valid.sum(), 1) if reduction == 1 else 1)
    hot = ((t[..., None] == np.arange(self.shape[-1])) * valid[..., None]).astype(np.float32)
    return -hot * (g[..., None] if np.ndim(g) else g)


def native_layer_norm(input, normalized_shape, weight, bias, eps):
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    mean = input.mean(axis=axes, keepdims=True)
    rstd = 1 / np.sqrt(((input - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    out = (input - mean) * rstd
    out = out * weight if weight is not None else out
    return (out + bias if bias is not None else out), mean, rstd


def native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias,
                               output_mask=(True, True, True)):
    axes = tuple(range(input.ndim - len(normalized_shape), input.ndim))
    lead = tuple(range(input.ndim - len(normalized_shape)))
    xhat = (input - mean) * rstd
    dxhat = grad_out * weight if weight is not None else grad_out
    dx = rstd * (dxhat - dxhat.mean(axis=axes, keepdims=True)
                 - xhat * (dxhat * xhat).mean(axis=axes, keepdims=True))
    return dx, (grad_out * xhat).sum(axis=lead), grad_out.sum(axis=lead)


def _pad(x, padding):
    return np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in padding])


def _windows(x, kshape, stride, dilation):
    # (N, C, *out, *k) view of every receptive field.
    span = [d * (k - 1) + 1 for k, d in zip(kshape, dilation)]
    w = sliding_window_view(x, span, axis=tuple(range(2, x.ndim)))
    for i, (s, d) in enumerate(zip(stride, dilation)):
        w = np.take(w, np.arange(0, w.shape[2 + i], s), axis=2 + i)
        w = np.take(w, np.arange(0, span[i], d), axis=x.ndim + i)
    return w


def convolution(input, weight, bias, stride, padding, dilation, transposed=False,
                output_padding=(0, 0), groups=1):
    assert not transposed and groups == 1, "only plain convolutions have NumPy semantics here"
    w = _windows(_pad(input, padding), weight.shape[2:], stride, dilation)
    out = np.einsum("nchwij,ocij->nohw", w, weight, optimize=True)
    return out + bias.reshape(1, -1, 1, 1) if bias is not None else out


def convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
                         transposed=False, output_padding=(0, 0), groups=1, output_mask=(True,) * 3):
    xp = _pad(input, padding)
    gw = np.einsum("nchwij,nohw->ocij", _windows(xp, weight.shape[2:], stride, dilation), grad_output,
                   optimize=True)
    gx = np.zeros_like(xp)
    (ho, wo), (kh, kw) = grad_output.shape[2:], weight.shape[2:]
    for i in range(kh):
        for j in range(kw):
            r, c = i * dilation[0], j * dilation[1]
            gx[:, :, r:r + stride[0] * (ho - 1) + 1:stride[0], c:c + stride[1] * (wo - 1) + 1:stride[1]] += \
                np.einsum("nohw,oc->nchw", grad_output, weight[:, :, i, j])
    gx = gx[:, :, padding[0]:gx.shape[2] - padding[0], padding[1]:gx.shape[3] - padding[1]]
    return gx, gw, grad_output.sum(axis=(0, 2, 3))


def native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    axes = (0,) + tuple(range(2, input.ndim))
    bshape = (1, -1) + (1,) * (input.ndim - 2)
    mean = input.mean(axis=axes) if training else running_mean
    var = input.var(axis=axes) if training else running_var
    invstd = 1 / np.sqrt(var + eps)
    y = (input - mean.reshape(bshape)) * invstd.reshape(bshape)
    y = y * weight.reshape(bshape) if weight is not None else y
    return (y + bias.reshape(bshape) if bias is not None else y), mean, invstd


def native_batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                               save_invstd, train, eps, output_mask=(True,) * 3):
    axes = (0,) + tuple(range(2, input.ndim))
    bshape = (1, -1) + (1,) * (input.ndim - 2)
    mean, invstd = (save_mean, save_invstd) if train else (running_mean, 1 / np.sqrt(running_var + eps))
    xhat = (input - mean.reshape(bshape)) * invstd.reshape(bshape)
    dbeta, dgamma = grad_out.sum(axis=axes), (grad_out * xhat).sum(axis=axes)
    w = weight.reshape(bshape) if weight is not None else 1
    if not train:
        return grad_out * invstd.reshape(bshape) * w, dgamma, dbeta
    n = input.size // input.shape[1]
    dx = (w * invstd.reshape(bshape) / n) * (n * grad_out - dbeta.reshape(bshape)
                                             - xhat * dgamma.reshape(bshape))
    return dx, dgamma, dbeta


def _select_backward(grad_output, input_sizes, dim, index):
    out = np.zeros(tuple(input_sizes), grad_output.dtype)
    idx = [slice(None)] * len(input_sizes)
    idx[dim % len(input_sizes)] = index
    out[tuple(idx)] = grad_output
    return out


def _expand(self, size):
    lead = len(size) - self.ndim
    return np.broadcast_to(self, [self.shape[i - lead] if (n == -1 and i >= lead) else n
                                  for i, n in enumerate(size)])


def _squeeze(self, dim=None):
    dims = range(self.ndim) if dim is None else dims_of(dim, self.ndim)
    return self.reshape([n for i, n in enumerate(self.shape) if not (i in dims and n == 1)])


def _un(f):
    return lambda self: f(self)


def _bin(f):
    return lambda self, other: f(self, other)


IMPL = {
    "neg": lambda self: -self, "relu": lambda self: np.maximum(self, 0), "tanh": _un(np.tanh),
    "sigmoid": lambda self: 1 / (1 + np.exp(-self)), "exp": _un(np.exp), "log": _un(np.log),
    "rsqrt": lambda self: 1 / np.sqrt(self), "sqrt": _un(np.sqrt), "abs": _un(np.abs),
    "reciprocal": lambda self: 1 / self, "clone": lambda self: self.copy(),
    "silu": lambda self: self / (1 + np.exp(-self)), "erf": erf, "logical_not": _un(np.logical_not),
    "gelu": gelu,
    "add": _bin(np.add), "sub": _bin(np.subtract), "mul": _bin(np.multiply), "div": _bin(np.divide),
    "maximum": _bin(np.maximum), "minimum": _bin(np.minimum), "rsub": lambda self, other: other - self,
    "pow": _bin(np.power),
    "eq": _bin(np.equal), "ne": _bin(np.not_equal), "ge": _bin(np.greater_equal), "gt": _bin(np.greater),
    "le": _bin(np.less_equal), "lt": _bin(np.less),
    "where": lambda condition, self, other: np.where(condition, self, other),
    "threshold_backward": lambda grad_output, self, threshold=0.0: np.where(self <= threshold, 0, grad_output),
    "gelu_backward": gelu_backward,
    "tanh_backward": lambda grad_output, output: grad_output * (1 - output * output),
    "sigmoid_backward": lambda grad_output, output: grad_output * output * (1 - output),
    "_to_copy": lambda self, dtype: self.astype(np.float32 if dtype == "bfloat16" else dtype),
    "one_hot": lambda self, num_classes: (self[..., None] == np.arange(num_classes)).astype(np.int64),
    "nll_loss_forward": nll_loss_forward, "nll_loss_backward": nll_loss_backward,
    "permute": lambda self, dims: np.transpose(self, dims),
    "transpose": lambda self, dim0, dim1: np.swapaxes(self, dim0, dim1),
    "t": lambda self: self.T,
    "view": lambda self, size: self.reshape(view_shape(self.shape, size)),
    "expand": _expand,
    "unsqueeze": lambda self, dim: np.expand_dims(self, dim % (self.ndim + 1)),
    "squeeze": _squeeze,
    "getitem": lambda self, index: self[index],
    "select": lambda self, dim, index: np.take(self, index, axis=dim),
    "select_backward": _select_backward,
    "sum": _reduce(np.sum), "amax": _reduce(np.max), "amin": _reduce(np.min), "mean": _reduce(np.mean),
    "mm": lambda self, mat2: self @ mat2, "bmm": lambda self, mat2: self @ mat2,
    "addmm": lambda self, mat1, mat2, beta=1, alpha=1: beta * self + alpha * (mat1 @ mat2),
    "_softmax": _softmax, "_log_softmax": _log_softmax,
    "_softmax_backward_data": lambda grad_output, output, dim, input_dtype=None:
        output * (grad_output - (grad_output * output).sum(axis=dim, keepdims=True)),
    "_log_softmax_backward_data": lambda grad_output, output, dim, input_dtype=None:
        grad_output - np.exp(output) * grad_output.sum(axis=dim, keepdims=True),
    "native_layer_norm": native_layer_norm, "native_layer_norm_backward": native_layer_norm_backward,
    "convolution": convolution, "convolution_backward": convolution_backward,
    "native_batch_norm": native_batch_norm, "native_batch_norm_backward": native_batch_norm_backward,
    "embedding": lambda weight, indices: weight[indices],
    "full": lambda size, fill_value, dtype: np.full(size, fill_value),
}
