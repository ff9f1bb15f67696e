"""Which library an array comes from: the one classification both GPU backends start from."""
import numpy as np


def array_kind(x):
    """'numpy', 'torch', 'cupy', 'cuda_array' (anything else with __cuda_array_interface__, e.g.
    numba device arrays), 'dlpack' (anything else with __dlpack__), or None (not an array)."""
    if isinstance(x, np.ndarray):
        return "numpy"
    mod = type(x).__module__.split(".")[0]
    if mod in ("torch", "cupy"):
        return mod
    if hasattr(x, "__cuda_array_interface__"):
        return "cuda_array"
    if hasattr(x, "__dlpack__"):
        return "dlpack"
    return None
