"""Replacements of numba internals that are in force only while a build runs.

A build (runtime/build.py) activates them; code outside a build, and a later build that defines
new intrinsics or overloads, sees numba as it is. Activations nest (a build inside a build) and
are thread-safe; the originals come back when the outermost one ends.
"""
import contextlib
import threading


class Scoped:
    """`with scoped():` puts wrap(original) in place of owner.name for each (owner, name, wrap)
    that `targets()` lists, for as long as any activation lasts."""

    def __init__(self, targets):
        self._targets = targets
        self._lock = threading.Lock()
        self._depth = 0
        self._restore = []

    @contextlib.contextmanager
    def __call__(self):
        with self._lock:
            if self._depth == 0:
                self._restore = [_install(owner, name, wrap) for owner, name, wrap in self._targets()]
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0:
                    for restore in self._restore:
                        restore()


def present(found):
    """The (owner, name, wrap) of `found` whose owner defines name itself: none where numba's
    internals are not the ones a replacement was written against (the build is then only
    slower, never wrong)."""
    return [t for t in found if t[1] in t[0].__dict__]


def _install(owner, name, wrap):
    """Replace owner.name by wrap(original); return the function that puts the original back."""
    original = owner.__dict__[name]
    setattr(owner, name, wrap(original))
    return lambda: setattr(owner, name, original)
