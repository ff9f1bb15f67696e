"""A plugin module that registers a second backend named "numpy" (for the bad-input table)."""
from evt_core.backend import Backend, Support
from evt_core.plugin import hookimpl


class ImpostorNumpy(Backend):
    name = "numpy"

    def available(self):
        return Support.yes()

    def compile(self, tree, options):
        raise AssertionError("the first 'numpy' backend must stay registered")


@hookimpl
def evt_register_backends(registry):
    registry.add(ImpostorNumpy)
