"""The kernel ABI shared by every generated kernel: an ordered list of scalar parameters.

On the GPU every tensor travels as (pointer, sL, sM, sN) in elements (0 on axes it does not
span) and every other parameter is an int64 or fp32 scalar, so the cubin can be launched by a
ctypes cuLaunchKernel with one 8- or 4-byte slot per parameter. In the simulator the pointer
slots carry flat NumPy arrays instead and the same offsets index them.
"""
from dataclasses import dataclass


@dataclass(frozen=True)
class Param:
    name: str
    kind: str      # "ptr" | "int" | "f32"


def main_params(program):
    """Parameters of the fused GEMM + epilogue kernel, in order."""
    ps = [Param("pA", "ptr"), Param("pB", "ptr")]
    ps += [Param(n, "int") for n in ("L", "M", "N", "K", "sAL", "sAM", "sAK", "sBL", "sBK", "sBN")]
    for k in range(len(program.inputs)):
        ps += _tensor(f"in{k}")
    ps += [Param(f"sc{k}", "f32") for k in range(len(program.scalars))]
    for k in range(len(program.outputs)):
        ps += _tensor(f"out{k}")
    for k in range(len(program.reductions)):
        ps += [Param(f"ws{k}", "ptr"), Param(f"ws{k}_wm", "int"), Param(f"ws{k}_wn", "int")]
    return ps


def finish_params(program):
    """Parameters of the finishing kernel: per reduction its workspace, the number of partial
    slots along each reduced axis, and the output tensor."""
    ps = [Param(n, "int") for n in ("L", "M", "N")]
    for k in range(len(program.reductions)):
        ps += [Param(f"ws{k}", "ptr")] + [Param(f"ws{k}_{a}", "int") for a in ("pl", "pm", "pn", "wm", "wn")]
        ps += _tensor(f"red{k}")
    return ps


def _tensor(prefix):
    return [Param(f"{prefix}_p", "ptr"), Param(f"{prefix}_sl", "int"), Param(f"{prefix}_sm", "int"),
            Param(f"{prefix}_sn", "int")]


def numba_signature(params):
    """The numba signature tuple for compile_ptx (pointers are plain int64 on the GPU)."""
    from numba import float32, int64
    return tuple(float32 if p.kind == "f32" else int64 for p in params)


def arg_list(params):
    return ", ".join(p.name for p in params)
