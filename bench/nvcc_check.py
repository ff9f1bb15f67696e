"""GPU-free build checks of generated sources: nvcc -cubin for sm_90a with the ptxas resource
report, and SASS instruction counts through cuobjdump. Used by tests/cupy (CPU CI) and by the
GPU run for the SASS report. nvcc and cuobjdump are found on PATH or in the nvidia wheels.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field


def find_tool(name):
    path = shutil.which(name)
    if path:
        return path
    for root in sys.path + [os.path.dirname(os.path.dirname(sys.executable))]:
        hits = glob.glob(os.path.join(root, "nvidia", "*", "bin", name)) + glob.glob(
            os.path.join(root, "lib", "python3*", "site-packages", "nvidia", "*", "bin", name))
        if hits:
            return hits[0]
    return None


@dataclass
class BuildReport:
    kernel: str
    registers: int = 0
    stack: int = -1
    spill_stores: int = -1
    spill_loads: int = -1
    warnings: list = field(default_factory=list)
    sass: dict = field(default_factory=dict)
    listing: list = field(default_factory=list)     # the kernel's opcodes (with modifiers), in address order


_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
SASS_OPS = ("HGMMA", "HMMA", "FFMA", "UTMALDG", "UTMASTG", "MEMBAR.ALL.GPU", "LDL", "STL", "LDGSTS", "LDSM",
            "MUFU.TANH", "MUFU.EX2", "LDG", "STG", "LDS", "STS", "SHFL", "BAR.SYNC", "FSEL",
            "ST.E", "LD.E")   # ST.E / LD.E: generic-space accesses (into shared memory they pay a space check)


def build(source, kernel="evt_main", arch="sm_90a"):
    """Compile `source` to a cubin; return the BuildReport of `kernel`. Raises RuntimeError
    with nvcc's output when compilation fails."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        raise FileNotFoundError("nvcc not found")
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(cu, "w") as f:
            f.write(source)
        cc = arch.replace("sm_", "")
        r = subprocess.run([nvcc, f"-gencode=arch=compute_{cc},code=sm_{cc}", "-cubin", "-std=c++17",
                            "-Xptxas", "-v", "-diag-suppress", "177,550", "-o", cubin, cu],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nvcc failed:\n{r.stderr[-4000:]}")
        rep = _parse(r.stderr, kernel)
        rep.sass = sass_counts(cubin, kernel)
        rep.listing = sass_listing(cubin, kernel)
    return rep


def _parse(log, kernel):
    rep = BuildReport(kernel)
    blocks = log.split("Compiling entry function")
    for b in blocks[1:]:
        if f"'{kernel}'" not in b.splitlines()[0]:
            continue
        m = _PROPS.search(b)
        if m:
            rep.stack, rep.spill_stores, rep.spill_loads = map(int, m.groups())
        m = re.search(r"Used (\d+) registers", b)
        if m:
            rep.registers = int(m.group(1))
    rep.warnings = [ln for ln in log.splitlines() if "warning" in ln.lower() or "C75" in ln]
    return rep


def sass_listing(cubin, kernel):
    """The kernel's instructions in address order, each as its opcode with modifiers
    ("HGMMA.64x128x16.F32", "WARPGROUP.DEPBAR.LE"); [] without cuobjdump."""
    tool = find_tool("cuobjdump")
    if tool is None:
        return []
    out = subprocess.run([tool, "-sass", "-fun", kernel, cubin], capture_output=True, text=True).stdout
    return re.findall(r"(?m)^\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Za-z0-9_.]*)", out)


# what counts as epilogue work in work_under_wgmma: fp32 arithmetic, MUFU, conversions, shared memory
_EPILOGUE_WORK = ("FFMA", "FMUL", "FADD", "MUFU", "STS", "LDS", "F2FP", "HADD2")


def work_under_wgmma(listing):
    """Per issued wgmma group (a run of HGMMA), the fp32, conversion and shared-memory
    instructions before the next wgmma wait (WARPGROUP.DEPBAR): work the SM does while that
    group runs on the tensor cores."""
    out, i = [], 0
    while i < len(listing):
        if not listing[i].startswith("HGMMA"):
            i += 1
            continue
        while i < len(listing) and listing[i].startswith("HGMMA"):
            i += 1
        work = 0
        while i < len(listing) and not listing[i].startswith("WARPGROUP.DEPBAR"):
            work += listing[i].split(".")[0] in _EPILOGUE_WORK
            i += 1
        out.append(work)
    return out


def sass_counts(cubin, kernel):
    tool = find_tool("cuobjdump")
    if tool is None:
        return {}
    out = subprocess.run([tool, "-sass", "-fun", kernel, cubin], capture_output=True, text=True).stdout
    counts = {op: len(re.findall(rf"\b{re.escape(op)}\b", out)) for op in SASS_OPS}
    # every instruction line: "/*addr*/  [@pred] OPCODE ...", addresses of 4 or more hex digits
    counts["instructions"] = len(re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?[A-Z]", out))
    return counts
