"""Call typing memoised for the length of one build: numba's front end asks the same questions
of its function templates many times over, and the answers cost time, not information.

Why (cProfile of W1's sm_90a build): type inference re-runs every call constraint on each
propagation round until no type changes, 4 rounds for the kernel, so it resolved 1,464 calls of
which 146 were distinct; lowering then types each binary operator once or twice more. Every
resolution walks all templates of the function in order (14 for operator.add, the @overload
ones hashing the whole target-flags object on the way): a third of the build. The type of each
global function an instruction names (operator.add, an intrinsic) is looked up per round and per
binary operator too, each time through a typeof that fails and formats a coloured message first.

Answers are pure functions of their keys, so within a build the first one is reused:
  * a call: of the function type, the argument types, the typing context and the target flags
    of the function being compiled (the @overload templates key their compiled implementations
    on those flags); the flags by identity, numba pushes a fresh copy per function compiled.
    A hit replays the resolution's one side effect, the implementation key lowering looks up
    for the signature, so lowering picks exactly what an unmemoised resolution would have.
    Failures are not memoised (they raise afresh, ForceLiteralArg included);
  * a global's type: only of callables (functions, intrinsics, classes, device functions),
    whose numba type is fixed by their identity; constants are typed by value as before.
The memos live only inside `memoized()`: a later build that defines new intrinsics or overloads
sees them, and nothing outside a build changes.
"""
from .scoped_patches import Scoped, present


def _targets():
    """(class, method, wrapper) of each memo."""
    try:
        from numba.core.types.functions import BaseFunction
        from numba.cuda.core.targetconfig import ConfigStack  # noqa: F401  (_calls keys on it)
        from numba.cuda.target import CUDATypingContext
    except ImportError:
        return []
    return present([(BaseFunction, "get_call_type", _calls), (CUDATypingContext, "resolve_value_type", _globals)])


# While active (re-entrant), numba-cuda's call and global typing answer a repeated question from
# memos private to this activation.
memoized = Scoped(_targets)


def _calls(original):
    from numba.cuda.core.targetconfig import ConfigStack
    memo, keep = {}, []

    def get_call_type(self, context, args, kws):
        flags = ConfigStack.top_or_none()
        try:
            key = (self, tuple(args), tuple(sorted(kws.items())), id(context), id(flags))
            hit = memo.get(key)
        except TypeError:          # an unhashable literal: resolve it the ordinary way
            return original(self, context, args, kws)
        if hit is not None:
            sig, impl_key = hit
            self._impl_keys[sig.args] = impl_key
            return sig
        sig = original(self, context, args, kws)
        if sig is not None and sig.args in self._impl_keys:
            memo[key] = (sig, self._impl_keys[sig.args])
            keep.append((context, flags))     # ids in keys stay unique while the memo lives
        return sig
    return get_call_type


def _globals(original):
    memo = {}

    def resolve_value_type(self, val):
        if not callable(val):
            return original(self, val)
        key = (id(self), id(val))
        hit = memo.get(key)
        if hit is not None and hit[0] is self and hit[1] is val:
            return hit[2]
        ty = original(self, val)
        memo[key] = (self, val, ty)      # both pinned: their ids stay their own
        return ty
    return resolve_value_type
