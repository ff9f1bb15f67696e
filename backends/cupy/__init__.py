"""The CuPy backend: generated CUDA C++ with inline PTX (mma.sync on sm_80+, wgmma + TMA on
sm_90a) compiled by NVRTC through CuPy. See docs/backend-cupy.md.

Importing this package needs neither CuPy nor a GPU: the source generator (codegen/) is pure
Python so CPU CI can compile its output with nvcc.
"""
