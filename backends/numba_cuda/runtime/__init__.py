"""Build, load and launch: build (source -> PTX -> cubin, cached), build_sm90 (the LTO-IR route
for sm_90a), driver (ctypes libcuda: modules, launches, buffers, streams), arrays (NumPy / CuPy /
torch / CUDA-array-interface views), fastcall (the repeated-call replay), launch_sm90 (tensor
maps, grid and watchdog of the sm_90a kernel), simulator (the Python helpers the CUDA simulator
runs in place of devicefns and ptx).
"""
