"""The numba-cuda backend: every Program becomes ONE fused GEMM + epilogue kernel.

Layout (docs/backend-numba.md has the file map): plugin.py registers backend.py (options,
available, supports, compile); runner.py runs a call (bind -> select -> build -> launch);
select.py picks the mainloop variant; codegen/ writes the kernel source; runtime/ builds,
loads and launches it.

Pipeline (named stages kept on the Kernel): program -> source (generated Python) -> ptx (numba,
compiled for sm_90 without needing a GPU) -> cubin (nvJitLink or the driver) -> a thin ctypes
launch. fp16/bf16 mainloops use tensor cores through inline PTX (mma.sync, ldmatrix, cp.async);
fp32 and awkward layouts use a SIMT mainloop; the simulator (NUMBA_ENABLE_CUDASIM=1) runs the
same generated SIMT source with Python helpers in place of the PTX ones.
"""
import numpy as _np

# numba-cuda 0.30.4 overloads np.row_stack unconditionally; numpy 2.5 removed it, so the first
# CUDA compile would fail with AttributeError. Restore the alias before numba.cuda is imported.
if not hasattr(_np, "row_stack"):
    _np.row_stack = _np.vstack

__all__ = ["NumbaCudaBackend"]



def __getattr__(name):
    # Lazy, so `import evt_backends.numba_cuda` (the plugin) never imports numba.
    if name == "NumbaCudaBackend":
        from .backend import NumbaCudaBackend
        return NumbaCudaBackend
    raise AttributeError(name)
