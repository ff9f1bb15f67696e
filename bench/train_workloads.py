"""The training workloads of bench/train.py: a model, its inputs and its loss, at full size
(the issue's shapes) or at smoke size (tiny, for CPU CI).

Losses are sums (or sums over 64), never means over millions of elements: that is a static
loss scale, as mixed-precision training applies one. Without it the fp16 gradients of a mean
over 8M logits are about 1e-7, below fp16's normal range, and even eager's gradients came
out 17-170 % off the fp32 step's, so the gradient check accepted anything."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass
class Workload:
    key: str
    title: str
    build: Callable          # (smoke: bool) -> (model, inputs tuple, loss_fn(out, *inputs))
    dtypes: tuple            # dtypes measured on the GPU (CPU smoke runs float32)
    flops: Callable          # (smoke) -> forward+backward flops (3 x forward GEMM flops)


def _mlp(smoke):
    import torch
    from torch import nn
    rows, d, h = (64, 16, 32) if smoke else (16384, 256, 2048)
    model = nn.Sequential(nn.Linear(d, h), nn.ReLU(), nn.Linear(h, d))
    return model, (torch.randn(rows, d),), lambda y, x: y.float().square().sum() / 64


def _xmlcnn(smoke):
    import torch
    import torch.nn.functional as F
    from torch import nn
    rows, d, labels = (16, 32, 64) if smoke else (2048, 512, 4096)
    target = (torch.rand(rows, labels) < 0.05).float()
    return (nn.Linear(d, labels), (torch.randn(rows, d), target),
            lambda y, x, t: F.binary_cross_entropy_with_logits(y.float(), t, reduction="sum"))


def _softmax_ce(smoke, rows=736_392):
    import torch
    import torch.nn.functional as F
    from torch import nn
    rows, d, classes = (128, 16, 24) if smoke else (rows, 256, 352)
    target = torch.randint(0, classes, (rows,))
    return (nn.Linear(d, classes), (torch.randn(rows, d), target),
            lambda y, x, t: F.cross_entropy(y.float(), t, reduction="sum"))


def _bert(smoke):
    import torch
    from torch import nn
    b, s, d, heads, ffn = (2, 16, 64, 4, 128) if smoke else (32, 512, 1024, 16, 4096)
    model = nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
    return model, (torch.randn(b, s, d),), lambda y, x: y.float().square().sum() / 64


def _lm(smoke):
    """A BERT-Large encoder layer under a vocabulary head, with the cross-entropy in the same
    graph: a language model's step (min-cut keeps the head's 16-bit logits for the backward)."""
    import torch
    import torch.nn.functional as F
    from torch import nn
    b, s, d, heads, ffn, vocab = (2, 16, 64, 4, 128, 96) if smoke else (32, 512, 1024, 16, 4096, 30522)
    model = nn.Sequential(nn.TransformerEncoderLayer(d, heads, ffn, dropout=0.0, activation="gelu", batch_first=True),
                          nn.Linear(d, vocab))
    target = torch.randint(0, vocab, (b * s,))
    return (model, (torch.randn(b, s, d), target),
            lambda y, x, t: F.cross_entropy(y.flatten(0, 1).float(), t, reduction="sum"))


def _gemm_flops(*mnk):
    return 3 * 2 * mnk[0] * mnk[1] * mnk[2]


WORKLOADS = {
    "mlp": Workload("mlp", "MLP 256→2048→256 ReLU (16384 rows)", _mlp, ("float16",),
                    lambda s: 2 * _gemm_flops(*((64, 32, 16) if s else (16384, 2048, 256)))),
    "xmlcnn": Workload("xmlcnn", "XML-CNN U-turn: Linear 512→4096 + BCE-with-logits, batch 2048", _xmlcnn,
                       ("float16",), lambda s: _gemm_flops(*((16, 64, 32) if s else (2048, 4096, 512)))),
    "softmax_ce": Workload("softmax_ce", "softmax cross-entropy U-turn: Linear 256→352 + CE, 736,392 rows",
                           _softmax_ce, ("float16",),
                           lambda s: _gemm_flops(*((128, 24, 16) if s else (736_392, 352, 256)))),
    "bert": Workload("bert", "BERT-Large encoder layer (hidden 1024, 16 heads, FFN 4096, batch 32, seq 512)",
                     _bert, ("float16", "bfloat16"),
                     lambda s: 0 if s else _gemm_flops(32 * 512, 1024, 1024) * 4 + _gemm_flops(32 * 512, 4096, 1024) * 2
                     + 2 * _gemm_flops(32 * 16 * 512, 512, 64)),
    "lm": Workload("lm", "BERT-Large encoder layer + a 30,522-word head + cross-entropy (batch 32, seq 512)",
                   _lm, ("float16",),
                   lambda s: 0 if s else _gemm_flops(32 * 512, 1024, 1024) * 4 + _gemm_flops(32 * 512, 4096, 1024) * 2
                   + 2 * _gemm_flops(32 * 16 * 512, 512, 64) + _gemm_flops(32 * 512, 30522, 1024)),
}
