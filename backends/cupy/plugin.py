"""Registers the "cupy" backend. Imports nothing heavy: CuPy loads inside available()/compile()."""
from evt_core.plugin import hookimpl


@hookimpl
def evt_register_backends(registry):
    from .backend import CupyBackend
    registry.add(CupyBackend)
