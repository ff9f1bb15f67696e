"""Old import path of codegen/finish.py, kept for tests/core/test_cache.py (outside this package)."""
from .codegen.finish import THREADS, finish_source

__all__ = ["THREADS", "finish_source"]
