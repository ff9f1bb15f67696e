"""Plugin entry point: registers the numba_cuda backend. Imports nothing heavy (numba is
imported only when the backend checks availability or compiles)."""
from evt_core.plugin import hookimpl


@hookimpl
def evt_register_backends(registry):
    from .backend import NumbaCudaBackend
    registry.add(NumbaCudaBackend)
