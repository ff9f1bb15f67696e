"""Typed errors. Every problem a user can cause raises a subclass of EvtError that names the
offending input, output or node and says what to do; nothing in this package raises a bare
Exception or lets a NumPy/Numba traceback escape for bad input."""


class EvtError(Exception):
    """Root of every error this package raises on purpose."""


class TraceError(EvtError):
    """The epilogue function cannot be traced: a missing `accum` parameter, a missing example,
    an unnamed returned expression, an unknown op, a Python construct with no tree meaning.
    The message names the parameter, output or expression and the fix."""


class ShapeError(EvtError, ValueError):
    """Shapes that do not fit: operands that do not broadcast, a reduction output whose shape
    does not match `over`, or an input whose shape at call time differs from its traced role.
    The message names the tensor(s) and both shapes."""


class DTypeError(EvtError, TypeError):
    """An array whose dtype is not the one the tree was traced with (or not a supported dtype:
    float32, float16, bfloat16). Cast the array or re-trace with the new dtype."""


class UnsupportedError(EvtError):
    """The tree is valid but cannot be compiled as asked: a layout no node kind can express,
    an op a backend has no spelling for, an option a backend does not take."""

    def __init__(self, message, node=None):
        super().__init__(message)
        self.node = node


class BackendNotFoundError(EvtError, LookupError):
    """`compile(tree, backend=name)` with a name no plugin registered, or a backend whose
    plugin failed to load. The message lists the registered backends and any load errors."""

    def __init__(self, name, available, load_errors=None, disabled=()):
        self.name, self.available, self.load_errors = name, tuple(available), dict(load_errors or {})
        if name in disabled:
            msg = (f"backend {name!r} is disabled by EVT_DISABLE_PLUGINS={','.join(disabled)}; remove it from "
                   f"that variable to use it (enabled: {', '.join(self.available) or 'none'})")
            super().__init__(msg)
            return
        if not isinstance(name, str):
            msg = (f"backend must be a backend name (a string), got {type(name).__name__} {name!r}; "
                   f"registered: {', '.join(self.available) or 'none'}, or 'auto'")
            super().__init__(msg)
            return
        msg = f"no backend named {name!r}; registered: {', '.join(self.available) or 'none'}"
        import difflib
        close = difflib.get_close_matches(name.replace("-", "_").lower(), self.available, n=1)
        if close:
            msg += f" (did you mean {close[0]!r}?)"
        if name in self.load_errors:
            msg += f"\nthe plugin for {name!r} failed to load: {self.load_errors[name]}"
        super().__init__(msg)


class BackendUnavailableError(EvtError, RuntimeError):
    """The backend is registered but cannot run here (no GPU, missing library). The message
    carries the backend's own reason."""


class KernelCompileError(EvtError, RuntimeError):
    """A backend failed to build the kernel it generated. This is a bug in the backend, not in
    the caller's tree; the message carries the stage and the generated source."""

    def __init__(self, backend, stage, detail, source=""):
        self.backend, self.stage, self.source = backend, stage, source
        super().__init__(f"{backend}: {stage} failed: {detail}")


class ArgumentError(EvtError, TypeError):
    """A call with an argument of the wrong kind: an aux input passed positionally, a string or
    bool where a number is expected, a masked array, an option of the wrong type. The message
    names the argument and says what to pass instead."""


class ResourceError(EvtError, MemoryError):
    """The problem does not fit: an output or the accumulator needs more memory than can be
    allocated. The message names the tensor and the size."""


class PluginError(EvtError, ValueError):
    """A plugin registered something inconsistent (two backends under one name). The message
    names both classes."""
