"""Generated source -> LTO-IR (numba, sm_90a, launch bounds 384 x 1) -> cubin (nvJitLink -lto).

Two traps of the PTX route make this path necessary (numba-hopper-notes.md): `compile_ptx`
with cc=(9, 0) targets sm_90, where ptxas refuses wgmma; and PTX handed to nvJitLink loses
setmaxnreg ("ignored to maintain compatibility across compilation units", only an info line),
after which the consumers spill and ptxas serialises the wgmmas. Through LTO-IR with a known
register count at entry the SASS keeps both USETMAXREG. The link's info log is checked for
those messages, so a silent regression becomes a build error.
"""
import contextlib
import struct
from types import SimpleNamespace

from evt_core.errors import KernelCompileError

from ...gpu.sm90 import THREADS
from . import build
from ..codegen.abi import numba_signature

CC = (9, 0, "a")
# nvJitLink / ptxas info lines that mean the kernel lost what it was built for
_FATAL_INFO = ("setmaxnreg' ignored", "unable to determine register count", "serialized", "C7504", "C7508", "C7510",
               "C7519")


def compile_sm90a(key, body, name, params):
    from .. import __name__ as _pkg  # noqa: F401  (applies the numpy shim before numba.cuda)
    from numba import cuda
    source = build.module_source(body, key, simulator=False)
    fn = build.load_python(source, name, key)
    try:
        with _device_functions_for(CC[:2]):
            ltoir, _ = cuda.compile(fn, numba_signature(params), device=False, abi="numba", output="ltoir", cc=CC,
                                    opt=True, launch_bounds=(THREADS, 1))
    except Exception as e:
        raise KernelCompileError("numba_cuda", "numba->ltoir", f"{type(e).__name__}: {e}", source) from e
    build.COMPILES["count"] += 1
    cubin, info = link_ltoir(bytes(ltoir), source)
    bad = [line for line in info.splitlines() if any(f in line for f in _FATAL_INFO)]
    if bad:
        raise KernelCompileError("numba_cuda", "nvJitLink", "the sm_90a kernel lost its register split or "
                                 "serialised its wgmmas:\n" + "\n".join(bad), source)
    note = f"(built through LTO-IR for sm_90a: no PTX stage)\n{info}"
    return build.store(key, source, note, cubin, kernel_entry(cubin), "cubin")


@contextlib.contextmanager
def _device_functions_for(cc):
    """numba compiles a kernel's device functions (the fragment epilogue's epi_pair) for the
    compute capability of the current device, which it asks the driver for; this build targets
    sm_90a with or without a GPU present (CI builds it on CPUs), so the question gets the
    target's answer. The function's IR is linked into the kernel's module either way."""
    from numba.cuda import dispatcher
    real = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = real


def link_ltoir(ltoir, source):
    """(cubin, info log) of one LTO-IR module linked for sm_90a."""
    from cuda.bindings import nvjitlink as nj
    h = nj.create(4, ["-arch=sm_90a", "-lto", "-O3", "-verbose"])
    try:
        nj.add_data(h, nj.InputType.LTOIR, ltoir, len(ltoir), "evt_sm90")
        try:
            nj.complete(h)
        except Exception as e:
            raise KernelCompileError("numba_cuda", "nvJitLink", f"{e}: {_log(nj, h, error=True)}", source) from e
        cubin = bytearray(nj.get_linked_cubin_size(h))
        nj.get_linked_cubin(h, cubin)
        return bytes(cubin), _log(nj, h, error=False)
    finally:
        nj.destroy(h)


def _log(nj, h, error):
    size = (nj.get_error_log_size if error else nj.get_info_log_size)(h)
    buf = bytearray(size)
    if size:
        (nj.get_error_log if error else nj.get_info_log)(h, buf)
    return bytes(buf).rstrip(b"\0").decode(errors="replace")


def kernel_entry(cubin):
    """The one kernel's symbol, read from the cubin's ELF section names (`.text.<entry>`): numba
    mangles the name and the LTO path does not hand the PTX (where the other path reads it) back."""
    if cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        raise KernelCompileError("numba_cuda", "nvJitLink", "the linked image is not a 64-bit ELF cubin")
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)

    def section(i):
        name, _, _, _, off, size = struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize)
        return name, off, size
    _, stroff, _ = section(shstrndx)
    names = []
    for i in range(shnum):
        name_off = section(i)[0]
        end = cubin.index(b"\0", stroff + name_off)
        names.append(cubin[stroff + name_off:end].decode())
    entries = [n[len(".text."):] for n in names if n.startswith(".text.")]
    if len(entries) != 1:
        raise KernelCompileError("numba_cuda", "nvJitLink", f"expected one kernel in the cubin, found {entries}")
    return entries[0]
