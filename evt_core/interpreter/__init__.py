"""The NumPy evaluators: the tree walker (reference.py, any pipeline stage) and the Program
evaluator (program.py, the lowered form backends compile)."""
from .program import evaluate_program
from .reference import apply_view, interpret

__all__ = ["interpret", "evaluate_program", "apply_view"]
