"""Plugins: how backends join evt_core.

Quick start for a backend author (the built-in `backends/numpy/plugin.py` is a complete
example):

    # my_backend/plugin.py
    from evt_core.backend import Backend, Kernel, Support
    from evt_core.plugin import hookimpl

    class MyBackend(Backend):
        name = "mine"
        options = {"fast": True}                  # accepted compile options and defaults
        def available(self): return Support.yes()  # never raises
        def compile(self, tree, options):
            program = tree.program                 # the lowered epilogue (evt_core.program)
            return Kernel(self.name, tree, run=lambda A, B, inputs: ...)

    @hookimpl
    def evt_register_backends(registry):
        registry.add(MyBackend)

    # pyproject.toml
    [project.entry-points."evt_core.backends"]
    mine = "my_backend.plugin"

Import no heavy library at module level: a plugin that fails to import is recorded, and the
error is shown only when someone asks for that backend. Hooks are listed in spec.py.
"""
import pluggy

PROJECT = "evt_core"
hookimpl = pluggy.HookimplMarker(PROJECT)
hookspec = pluggy.HookspecMarker(PROJECT)

__all__ = ["PROJECT", "hookimpl", "hookspec"]
