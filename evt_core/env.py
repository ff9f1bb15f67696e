"""The on/off environment switches the core reads (EVT_VERIFY, EVT_POISON, EVT_TRACE_PLUGINS).

Invariant: "1" is on; unset, "" and "0" are off; any other value (a typo such as "ture", or
"yes") is off too, with one warning per variable and value naming both, because the backends
test the same variables for "1" and a value the core took as "on" would mean different things
in different places."""
import os
import warnings

_warned = set()


def flag(name):
    value = os.environ.get(name, "")
    if value in ("", "0", "1"):
        return value == "1"
    if (name, value) not in _warned:
        _warned.add((name, value))
        warnings.warn(f"evt: {name}={value!r} is neither 0 nor 1; it is treated as 0 (off). Set {name}=1 "
                      "to turn it on", RuntimeWarning, stacklevel=3)
    return False
