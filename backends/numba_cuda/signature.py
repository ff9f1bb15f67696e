"""Old import path of codegen/abi.py, kept for tests/core/test_cache.py (outside this package)."""
from .codegen.abi import Param, arg_list, finish_params, main_params, numba_signature

__all__ = ["Param", "arg_list", "finish_params", "main_params", "numba_signature"]
