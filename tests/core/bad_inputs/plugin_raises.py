"""A plugin module whose evt_register_backends raises (for the bad-input table)."""
from evt_core.plugin import hookimpl


@hookimpl
def evt_register_backends(registry):
    raise RuntimeError("registration exploded")
