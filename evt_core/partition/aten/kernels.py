"""NumPy semantics of the multi-line ATen ops (softmax, losses, norms, convolution, layout
helpers), referenced by their records in `mainloops.py` and `structural.py`. Operands arrive
by parameter name, float tensors widened to float32; the evaluator rounds each result."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..shapes import dims_of


def reduce_with(fn):
    def run(self, dim=None, keepdim=False):
        return fn(self, axis=dims_of(dim, self.ndim), keepdims=keepdim)
    return run


def softmax(self, dim, half_to_float=False):
    e = np.exp(self - self.max(axis=dim, keepdims=True))
    return e / e.sum(axis=dim, keepdims=True)


def log_softmax(self, dim, half_to_float=False):
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


def select_backward(grad_output, input_sizes, dim, index):
    out = np.zeros(tuple(input_sizes), grad_output.dtype)
    idx = [slice(None)] * len(input_sizes)
    idx[dim % len(input_sizes)] = index
    out[tuple(idx)] = grad_output
    return out


def expand(self, size):
    lead = len(size) - self.ndim
    return np.broadcast_to(self, [self.shape[i - lead] if (n == -1 and i >= lead) else n
                                  for i, n in enumerate(size)])


def squeeze(self, dim=None):
    dims = range(self.ndim) if dim is None else dims_of(dim, self.ndim)
    return self.reshape([n for i, n in enumerate(self.shape) if not (i in dims and n == 1)])
