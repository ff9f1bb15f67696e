"""Example training graphs built with the public API. `EXAMPLES` maps a name to a builder
(keyword sizes; defaults are the paper-scale shapes); `small(name)` builds a version small
enough to execute on a CPU in tests. JSON exports of the defaults sit next to this file
(`python -m evt_core.partition.examples.export` rewrites them)."""
from __future__ import annotations

from .bert import bert_layer
from .conv_bn_relu import conv_bn_relu
from .cross_entropy import cross_entropy_head
from .mlp import mlp_block

EXAMPLES = {"mlp_block": mlp_block, "bert_layer": bert_layer, "cross_entropy_head": cross_entropy_head,
            "conv_bn_relu": conv_bn_relu}
SMALL = {"mlp_block": dict(tokens=64, d=32, hidden=48),
         "bert_layer": dict(batch=2, seq=16, hidden=32, heads=4, ffn=64),
         "cross_entropy_head": dict(tokens=64, d=32, classes=40),
         "conv_bn_relu": dict(n=2, c=3, k=4, hw=8)}


def small(name: str):
    return EXAMPLES[name](**SMALL[name])


__all__ = ["EXAMPLES", "SMALL", "small", "bert_layer", "conv_bn_relu", "cross_entropy_head", "mlp_block"]
