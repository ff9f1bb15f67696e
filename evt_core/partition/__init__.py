"""Graph-level fusion for training graphs: the IR, the EVT graph passes and an exact
branch-and-bound partitioner (issue 5). Quick start:

    from evt_core import partition as P
    g = P.Graph(); x = g.input("x", (8192, 768)); w = g.input("w", (768, 3072))
    g.output(g.add("gelu", g.add("mm", x, w), approximate="tanh"))
    plan = P.partition(g)          # plan.groups, plan.cost, plan.optimal, plan.stats
    out = P.run(plan, {"x": ..., "w": ...}, backend="numpy")
"""
from .errors import PartitionError
from .evaluate import evaluate
from .graph import Graph, Node
from .optable import Kind
from .types import TensorType

__all__ = ["Graph", "Node", "Kind", "TensorType", "PartitionError", "evaluate"]

from .cache import SolutionCache  # noqa: E402
from .cost import plan_cost  # noqa: E402
from .driver import partition  # noqa: E402
from .exhaustive import exhaustive_optimum  # noqa: E402
from .legality import check_plan, violations  # noqa: E402
from .plan import Plan, SolveStats  # noqa: E402

__all__ += ["partition", "Plan", "SolveStats", "SolutionCache", "plan_cost", "check_plan",
            "violations", "exhaustive_optimum"]
from .lowering import GroupTree, group_tree  # noqa: E402
from .run import RunResult, run  # noqa: E402

__all__ += ["run", "RunResult", "group_tree", "GroupTree"]
from . import passes  # noqa: E402
from .passes import PIPELINE, run_pipeline  # noqa: E402

__all__ += ["passes", "PIPELINE", "run_pipeline"]
