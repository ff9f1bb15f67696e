"""Tiny models and a lock-step trainer shared by the backend tests and the DDP worker."""
import copy

import torch
from torch import nn


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))


def gelu_mlp():
    """BERT's FFN shape: nn.GELU() is the erf form, so its backward is gelu_backward(approximate="none")."""
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 8))


def transformer_block():
    torch.manual_seed(0)
    return nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True, activation="gelu")


def train_side_by_side(model, x, y, loss_fn, backend, steps=3, lr=0.05):
    """Train a compiled copy and the eager model in lock step. Returns per step
    (compiled loss, eager loss, max |grad difference| / max(1, max |eager grad|)): relative to
    the gradients' scale, since the float32 GEMMs of NumPy and torch round differently by CPU."""
    eager = copy.deepcopy(model)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    opts = [torch.optim.SGD(m.parameters(), lr=lr) for m in (model, eager)]
    history = []
    for _ in range(steps):
        losses = []
        for m, net in ((model, compiled), (eager, eager)):
            loss = loss_fn(net(x), y)
            loss.backward()
            losses.append(loss.item())
        diff = max((p.grad - q.grad).abs().max().item() for p, q in zip(model.parameters(), eager.parameters()))
        diff /= max(1.0, max(q.grad.abs().max().item() for q in eager.parameters()))
        history.append((losses[0], losses[1], diff))
        for o in opts:
            o.step()
            o.zero_grad()
    return history
