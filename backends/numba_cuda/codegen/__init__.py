"""Kernel source generation: Program -> numba Python text, one module per concern.

spelling (op -> expression), devicefns (device functions the source calls), epilogue (the
per-element epilogue and its reductions), mainloop_simt / mainloop_mma / mainloop_sm90 (+
epilogue_sm90) (the three mainloops), finish (the reduction finishing kernel), abi (kernel
parameters and numba signatures), ptx / ptx_sm90 (inline-PTX intrinsics). Generating source
imports no numba except where a module defines device code (devicefns, ptx, ptx_sm90).
"""
