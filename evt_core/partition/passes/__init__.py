"""EVT graph passes (design doc 4). Each is a pure function Graph -> Graph whose docstring
states the invariant it establishes; `PIPELINE` is their order."""
from __future__ import annotations

from ..graph import Graph
from .constant_propagation import propagate_constants
from .cse import eliminate_common_subexpressions
from .decompose_loss import decompose_losses
from .decompose_norm import decompose_batch_norm, decompose_layer_norm_backward
from .loss_elimination import eliminate_loss
from .permutation_folding import fold_permutations
from .reduction_elimination import eliminate_reductions
from .rewrite import dce

PIPELINE = (eliminate_loss, decompose_losses, decompose_layer_norm_backward, decompose_batch_norm,
            fold_permutations, eliminate_common_subexpressions, eliminate_reductions,
            propagate_constants, eliminate_common_subexpressions, dce)


def run_pipeline(g: Graph, passes=PIPELINE) -> Graph:
    for p in passes:
        g = p(g)
    return g


__all__ = ["PIPELINE", "run_pipeline", "eliminate_loss", "decompose_losses",
           "decompose_layer_norm_backward", "decompose_batch_norm", "fold_permutations",
           "eliminate_common_subexpressions", "eliminate_reductions", "propagate_constants", "dce"]
