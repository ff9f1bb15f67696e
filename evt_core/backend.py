"""What a backend is. Backends are objects registered through the `evt_register_backends` hook
(see evt_core/plugin/), then looked up by name: compiling is a 1:1 dispatch, not a broadcast.

A backend author subclasses `Backend`, returns a `Kernel` from `compile`, and registers the
class from a plugin module; `backends/numpy/plugin.py` is the worked example.
"""
import abc
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .call import normalize_call
from .errors import EvtError, ResourceError


@dataclass(frozen=True, slots=True)
class Support:
    """An answer with its reason: `ok`, and when not ok, why and (optionally) which node."""
    ok: bool
    reason: str = ""
    node: Any = None

    def __bool__(self):
        return self.ok

    @classmethod
    def yes(cls):
        return cls(True)


class Backend(abc.ABC):
    """A compiler from a lowered Program to a callable kernel.

    name:      the string users pass to `evt_core.compile(tree, backend=name)`.
    options:   the compile options this backend accepts, with their defaults; `compile()`
               rejects any other keyword with an UnsupportedError naming it.
    """
    name: ClassVar[str]
    options: ClassVar[dict] = {}

    @abc.abstractmethod
    def available(self) -> Support:
        """Can this backend run here (driver, GPU, libraries)? Never raises."""

    def supports(self, tree, options) -> Support:
        """Can this backend compile `tree` with `options`? Return Support(False, reason, node)
        naming the node it cannot handle."""
        return Support.yes()

    @abc.abstractmethod
    def compile(self, tree, options) -> "Kernel":
        """Build the kernel. `tree.program` is the lowered Program to compile."""

    def hash(self) -> str:
        """Enters the compile-cache key: change it whenever generated code changes."""
        return f"{self.name}-1"


@dataclass
class Kernel:
    """A compiled epilogue: `kernel(A, B, **inputs) -> dict[name, array]`.

    run:     the backend's callable taking (A, B, inputs: dict) and returning the result dict.
    stages:  named intermediates, in order ("program", "source", "ptx", ...), kept for
             inspection and for EVT_DUMP.
    """
    backend: str
    tree: Any
    run: Any
    stages: dict = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    compile_seconds: float = 0.0

    def __reduce__(self):
        # Compiled code is process-local (device modules, closures): a kernel pickles as its
        # tree, backend and options and is compiled again where it is loaded (a disk-cache hit
        # for the GPU backends), so it can go to worker processes.
        return _compiled, (self.tree, self.backend, dict(self.options))

    def __call__(self, *args, **inputs):
        """kernel(A, B, **inputs). Arguments are checked and normalised (evt_core.call) before
        the backend's `run` sees them, so every backend refuses the same bad calls alike.

        A `run` may offer `run.fast_call(args, inputs)` for the repeated call: it gets the raw
        arguments of a call with exactly two positional ones and returns the result dict, or
        None to take the path above. It may return a result only for a call that
        evt_core.call.fast_signature admits (normalize_call would pass it unchanged) and whose
        signature a checked call has bound before, so every check keeps its meaning and a bad
        call still gets its typed error from the checked path."""
        fast = getattr(self.run, "fast_call", None) if len(args) == 2 else None
        if fast is not None:
            out = self._guarded(fast, args[0], args[1], args, inputs)
            if out is not None:
                return out
        A, B, inputs = normalize_call(self.tree.program, args, inputs)
        return self._guarded(self.run, A, B, A, B, inputs)

    def _guarded(self, fn, A, B, *call):
        """fn(*call), with an out-of-memory error (host or device: CuPy's and torch's OOM are
        MemoryErrors) turned into a ResourceError naming the problem size."""
        try:
            return fn(*call)
        except MemoryError as e:
            if isinstance(e, EvtError):
                raise
            raise ResourceError(f"{self.backend}: out of memory for A of shape {tuple(A.shape)} and B of shape "
                                f"{tuple(B.shape)} ({type(e).__name__}: {e}); split the problem") from e

    @property
    def source(self):
        """The last textual stage (generated source), or ''."""
        texts = [v for v in self.stages.values() if isinstance(v, str)]
        return texts[-1] if texts else ""

    def __repr__(self):
        return f"<Kernel backend={self.backend} outputs={list(self.tree.program.result_names)}>"


def _compiled(tree, backend, options):
    """Kernel.__reduce__'s inverse."""
    from .api import compile as compile_tree
    return compile_tree(tree, backend=backend, **options)
