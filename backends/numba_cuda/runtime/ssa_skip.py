"""numba's SSA reconstruction skipped for the length of one build of a generated kernel.

Why (W1-W4's sm_90a builds on a 2-core CPU): numba's front end rewrites every variable assigned
more than once into single-assignment form before typing (ReconstructSSA), so that one Python
name may hold values of different types at different points. Its block pass ran 119,222 times
for W2 and the whole pass took a fifth to a quarter of the build (W1 1.70 -> 1.22 s, W2 1.81
-> 1.43, W3 1.63 -> 1.38, W4 1.50 -> 1.11 without it). The kernels the generators write never
give a name two types: a name assigned more than once (the ring position, the accumulators,
a loop's running sum) keeps its type, so numba types it the same without the rewrite, and
LLVM's mem2reg builds single-assignment form from the allocas anyway. Checked: every kernel of
tests/numba_cuda/test_ssa_skip.py has the same SASS instructions (opcodes with modifiers,
counted; a few may come in another order) with and without the pass. Should a generated source
ever reuse a name at two types, typing unifies them (a wider type, which the SASS shows and the
test catches) or fails with a typed build error.

Only the option's default changes, only while a build runs (scoped_patches) and only in the
thread that runs it: a numba function compiled outside a build, in another thread meanwhile, or
one that sets `enable_ssa` itself is untouched.
"""
import contextlib
import threading

from .scoped_patches import Scoped, present

_building = threading.local()      # .depth: builds running in this thread


def _targets():
    try:
        from numba.cuda.flags import CUDAFlags
    except ImportError:
        return []
    return present([(CUDAFlags, "enable_ssa", _default_off)])


_patched = Scoped(_targets)


@contextlib.contextmanager
def skipped():
    """While active (re-entrant), numba-cuda's flags default to enable_ssa=False in this thread."""
    with _patched():
        _building.depth = getattr(_building, "depth", 0) + 1
        try:
            yield
        finally:
            _building.depth -= 1


def _default_off(original):
    if not isinstance(original, property):
        return original

    def getter(self):
        if "enable_ssa" in self._values or not getattr(_building, "depth", 0):
            return original.fget(self)
        return False
    return property(getter, original.fset, original.fdel, original.__doc__)
