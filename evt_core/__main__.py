"""`python -m evt_core`: the registered backends, whether each can run here and why not, and
whether the torch integration is importable."""
import importlib.util
import sys

import evt_core
from evt_core.plugin.manager import PREFERENCE


def main(argv=None) -> int:
    support = evt_core.backends()
    print(f"evt {evt_core.__version__}: backends (\"auto\" prefers {' > '.join(PREFERENCE)})")
    for name in sorted(support, key=lambda n: (PREFERENCE.index(n) if n in PREFERENCE else len(PREFERENCE), n)):
        s = support[name]
        state = "available" if s.ok else "unavailable: " + (s.reason.splitlines()[0] if s.reason else "no reason given")
        print(f"  {name:12s} {state}")
    has_torch = importlib.util.find_spec("torch") is not None
    print("torch integration: " + ("torch.compile(model, backend=\"evt\") (evt_core.torch)" if has_torch
                                   else "unavailable: torch is not installed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
