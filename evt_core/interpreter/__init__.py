"""The NumPy reference interpreter (see reference.py)."""
from .reference import apply_view, interpret

__all__ = ["interpret", "apply_view"]
