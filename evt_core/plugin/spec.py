"""Hook specifications. Backends are objects registered through `evt_register_backends` and
then looked up by name (compiling is a 1:1 dispatch); the other hooks are genuinely 1:N
concerns: choosing a backend for "auto", intercepting compiles, observing them."""
from typing import TYPE_CHECKING, Optional

from . import hookspec

if TYPE_CHECKING:   # annotation-only: this module imports without GPU libraries
    from ..backend import Backend, Kernel
    from ..tree.ir import Tree
    from .manager import BackendRegistry


@hookspec
def evt_register_backends(registry: "BackendRegistry") -> None:
    """Add Backend classes with `registry.add(MyBackend)`. Required for backend plugins."""


@hookspec(firstresult=True)
def evt_select_backend(tree: "Tree", candidates: tuple) -> Optional[str]:
    """Policy for `backend="auto"`: return one of `candidates` (available backends, best
    first), or None to defer to the next plugin. The default picks the first candidate."""


@hookspec(firstresult=True)
def evt_compile(tree: "Tree", backend: "Backend", options: dict) -> Optional["Kernel"]:
    """Compile `tree` with `backend`. The core's trylast implementation calls
    `backend.compile(tree, options)`; a plugin may return a kernel first (a cache) or wrap the
    call with `wrapper=True` (timing, dumps). Return None to defer."""


@hookspec
def evt_kernel_compiled(kernel: "Kernel", seconds: float) -> None:
    """Notification after each successful compile (logging, metrics)."""
