"""The pass pipeline, in order. Each pass is a pure function Tree -> Tree whose docstring
states the invariant it establishes; with EVT_VERIFY=1 the verifier runs after each one."""
from ..env import flag
from .lower import lower
from .passes.constant_folding import fold_constants
from .passes.cse import eliminate_common_subexpressions
from .passes.dag_to_tree import dag_to_tree
from .passes.dead_stores import eliminate_dead_stores
from .passes.layout_elimination import eliminate_layout
from .passes.shape_propagation import propagate_shapes
from .verify import verify, verify_tree_shape

PIPELINE = (
    propagate_shapes,                  # shapes checked; roles assigned if there is no layout op
    fold_constants,                    # all-constant arithmetic evaluated once, in fp32
    eliminate_layout,                  # permute/reshape become load/store strides
    propagate_shapes,                  # roles of the operands the layout pass touched
    eliminate_common_subexpressions,   # x*y and y*x become one value
    eliminate_dead_stores,             # stores that are not outputs disappear
    dag_to_tree,                       # shared values become topological visitors
)


def run_pipeline(tree, passes=PIPELINE, check=None):
    """Run `passes` on `tree`; returns the final tree with its lowered Program attached."""
    check = flag("EVT_VERIFY") if check is None else check
    for p in passes:
        tree = p(tree)
        if check:
            verify(tree, p.__name__)
    if check:
        verify_tree_shape(tree)
    return tree.replace(program=lower(tree))
