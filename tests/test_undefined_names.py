"""Every name the project's modules use is defined. Much of bench/ and backends/ runs only on a
GPU: CI imports it but never executes it, so a NameError there surfaces only on the GPU
(`bench.group_kernels --sweep` had one for a session). pyflakes' undefined-name check reads
every module without running it."""
import os

import pytest

pytest.importorskip("pyflakes")
from pyflakes import api, messages  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FOLDERS = ("evt_core", "backends", "bench", "scripts", "properties")
UNDEFINED = (messages.UndefinedName, messages.UndefinedLocal, messages.UndefinedExport)


class _Collect:
    """A pyflakes reporter that keeps the undefined-name messages and syntax errors."""
    def __init__(self):
        self.found = []

    def flake(self, message):
        if isinstance(message, UNDEFINED):
            self.found.append(str(message))

    def syntaxError(self, filename, msg, lineno, offset, text):
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename, msg):
        self.found.append(f"{filename}: {msg}")


def test_no_module_uses_an_undefined_name():
    report = _Collect()
    files = 0
    for folder in FOLDERS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, folder)):
            for name in sorted(names):
                if name.endswith(".py"):
                    api.checkPath(os.path.join(dirpath, name), report)
                    files += 1
    assert files > 100, files
    assert not report.found, "\n".join(report.found)
