"""SASS instruction counts of each bench/ladder.py rung's default kernel (sm_90a, nvcc + cuobjdump,
no GPU), for bench/SASS-cupy.md:

    PYTHONPATH=$PWD:/tmp/p python3 scripts/sass_ladder.py out.json R0,R1,R2,...

The counts are static instruction sites in evt_main; the epilogue of a tile is fully unrolled,
so for the epilogue instructions they equal the per-thread, per-tile dynamic counts. The Spec is
what decide_spec gives an 8192 x 3072 x 768 call with row-major, aligned operands under the
backend's default options.
"""
import json
import os
import sys
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import evt_core
from bench.ladder import LADDER
import evt_backends
from evt_backends.cupy.select import candidates, generate, smem_bytes
from bench.nvcc_check import build
from types import SimpleNamespace
from evt_backends.cupy.backend import CupyBackend
from evt_backends.cupy.select import decide_spec

def default_spec(program, M=8192, N=3072, K=768):
    def frame(op):
        sL, sM, sN = program.spans(op)
        return SimpleNamespace(array=SimpleNamespace(ptr=1 << 20), strides=(0, N if sM else 0, 1 if sN else 0))
    red = [SimpleNamespace(array=SimpleNamespace(ptr=1 << 20), strides=(0, 1 if "M" not in r.over else 0, 1 if "N" not in r.over else 0)) for r in program.reductions]
    bound = SimpleNamespace(L=1, M=M, N=N, K=K, A=SimpleNamespace(ptr=1 << 20), B=SimpleNamespace(ptr=1 << 20),
                            a_strides=(0, K, 1), b_strides=(0, N, 1), dtype="float16",
                            inputs=[frame(o) for o in program.inputs], outputs=[frame(o) for o in program.outputs],
                            reductions=red, scalars=[])
    return decide_spec(program, bound, dict(CupyBackend.options), (9, 0))

out = {}
for key in sys.argv[2].split(","):
    wl = LADDER[key]
    prog = evt_core.trace(wl.epilogue, wl.example(256, 512)).program
    spec = default_spec(prog)
    cfg = candidates(prog, spec)[0]
    rep = build(generate(prog, spec, cfg))
    s = rep.sass
    out[key] = dict(tile=cfg.label(), smem=smem_bytes(prog, spec, cfg), regs=rep.registers, spill=rep.spill_stores,
                    LDG=s["LDG"], LDS=s["LDS"], STS=s["STS"], ST_E=s["ST.E"], LD_E=s["LD.E"], STG=s["STG"],
                    UTMASTG=s["UTMASTG"], UTMALDG=s["UTMALDG"], SHFL=s["SHFL"], TANH=s["MUFU.TANH"], EX2=s["MUFU.EX2"],
                    FFMA=s["FFMA"], FSEL=s["FSEL"], instructions=s["instructions"])
    print(key, out[key], file=sys.stderr)
json.dump(out, open(sys.argv[1], "w"), indent=1)
