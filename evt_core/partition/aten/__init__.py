"""The graph level's ATen op registry: one `OpDef` record per op (record.py), registered by
family. Importing the package registers every op."""
from . import mainloops, pointwise, structural  # noqa: F401  (registration side effects)
from .record import REGISTRY, Kind, OpDef, Unfusible

ALIASES = {a: d.name for d in REGISTRY.values() for a in d.aliases}

__all__ = ["REGISTRY", "ALIASES", "Kind", "OpDef", "Unfusible"]
