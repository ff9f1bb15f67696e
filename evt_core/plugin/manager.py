"""The plugin manager, the backend registry, and the typed facade core code calls.

Built-in backends are registered by module path (so a checkout works without installation);
installed plugins come from the `evt_core.backends` entry-point group. A plugin that fails to
import is recorded, warned about, and surfaces in BackendNotFoundError only when asked for.
EVT_DISABLE_PLUGINS=a,b blocks plugins by name; EVT_TRACE_PLUGINS=1 prints every hook call.
"""
import importlib
import importlib.metadata
import os
import sys
import warnings

import pluggy

from ..env import flag
from ..errors import BackendNotFoundError, PluginError
from . import PROJECT, hookimpl, spec

DEFAULT_PLUGINS = (
    ("numpy", "evt_backends.numpy.plugin"),
    ("numba_cuda", "evt_backends.numba_cuda.plugin"),
    ("cupy", "evt_backends.cupy.plugin"),
)
PREFERENCE = ("cupy", "numba_cuda", "numpy")     # "auto": fastest available first


class BackendRegistry:
    """name -> Backend instance. Duplicate names are an error naming both classes."""

    def __init__(self):
        self._backends = {}
        self.load_errors = {}
        self.disabled = ()         # names blocked by EVT_DISABLE_PLUGINS

    def add(self, cls):
        name = cls.name
        if name in self._backends:
            raise PluginError(f"backend name {name!r} registered twice: by {type(self._backends[name]).__qualname__} "
                             f"and {cls.__qualname__}")
        self._backends[name] = cls()

    def get(self, name):
        if name not in self._backends:
            raise BackendNotFoundError(name, self.names(), self.load_errors, self.disabled)
        return self._backends[name]

    def names(self):
        return sorted(self._backends)


class _Defaults:
    """The core's own hook implementations (run last)."""

    @hookimpl(trylast=True)
    def evt_select_backend(self, tree, candidates):
        return candidates[0] if candidates else None

    @hookimpl(trylast=True)
    def evt_compile(self, tree, backend, options):
        return backend.compile(tree, options)


class Plugins:
    """Typed facade over the PluginManager: core code never touches `pm.hook` directly."""

    def __init__(self, load_entry_points=True):
        self.pm = pluggy.PluginManager(PROJECT)
        self.pm.add_hookspecs(spec)
        self.registry = BackendRegistry()
        disabled = [n.strip() for n in os.environ.get("EVT_DISABLE_PLUGINS", "").split(",") if n.strip()]
        for name in disabled:
            self.pm.set_blocked(name)
        self.registry.disabled = tuple(disabled)
        self.pm.register(_Defaults(), name="evt_core.defaults")
        for name, module in DEFAULT_PLUGINS:
            self._load(name, lambda m=module: importlib.import_module(m))
        known = [n for n, _ in DEFAULT_PLUGINS]
        if load_entry_points:
            for ep in importlib.metadata.entry_points(group="evt_core.backends"):
                known.append(ep.name)
                if ep.name not in self.registry.load_errors:
                    self._load(ep.name, ep.load)
        unknown = [n for n in disabled if n not in known]
        if unknown:    # a typo here would silently disable nothing
            warnings.warn(f"evt_core: EVT_DISABLE_PLUGINS names {', '.join(map(repr, unknown))}, which "
                          f"{'is' if len(unknown) == 1 else 'are'} not a plugin; known plugins: {', '.join(known)}",
                          RuntimeWarning, stacklevel=2)
        self.pm.check_pending()
        if flag("EVT_TRACE_PLUGINS"):
            self.pm.trace.root.setwriter(lambda s: sys.stderr.write(s))
            self.pm.enable_tracing()
        self._register_backends()

    def _register_backends(self):
        """Call each plugin's evt_register_backends on its own: one plugin that raises (or
        registers a taken name) is recorded like a failed import, and the others still load."""
        for impl in self.pm.hook.evt_register_backends.get_hookimpls():
            try:
                impl.function(registry=self.registry)
            except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
                self.registry.load_errors[impl.plugin_name] = f"{type(e).__name__}: {e}"
                warnings.warn(f"evt_core: plugin {impl.plugin_name!r} failed to register its backends: {e}",
                              RuntimeWarning, stacklevel=3)

    def _load(self, name, loader):
        if self.pm.is_blocked(name) or self.pm.get_plugin(name) is not None:
            return
        try:
            self.pm.register(loader(), name=name)
        except Exception as e:  # noqa: BLE001 - a broken plugin must not break the others
            self.registry.load_errors[name] = f"{type(e).__name__}: {e}"
            warnings.warn(f"evt_core: plugin {name!r} failed to load: {e}", RuntimeWarning, stacklevel=2)

    def select_backend(self, tree, candidates):
        return self.pm.hook.evt_select_backend(tree=tree, candidates=tuple(candidates))

    def compile(self, tree, backend, options):
        return self.pm.hook.evt_compile(tree=tree, backend=backend, options=options)

    def kernel_compiled(self, kernel, seconds):
        self.pm.hook.evt_kernel_compiled(kernel=kernel, seconds=seconds)


_plugins = None


def plugins():
    """The process-wide Plugins instance, created on first use."""
    global _plugins
    if _plugins is None:
        _plugins = Plugins()
    return _plugins


def reset_plugins():
    """Forget the loaded plugins (tests, or after installing a plugin in a running process)."""
    global _plugins
    _plugins = None
