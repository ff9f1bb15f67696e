"""Every generated numba_cuda source for a matrix of trees x variants x options, as one JSON
file (name -> text), for checking that a refactor leaves the generated kernels byte-identical:

    python3 tests/numba_cuda/dump_sources.py before.json        # on the old commit
    python3 tests/numba_cuda/dump_sources.py after.json --compare before.json

Trees: tests/numba_cuda/trees.py cases and the sm_90a programs of sm90_kernels.py. Sources:
the SIMT kernel (3 operand dtypes x GPU/simulator tiling), the mma.sync kernel (fp16/bf16 x A/B
layouts x both k-loops), the sm_90a kernel (fp16/bf16 x B layout x batched A/B; serial split-K
where the tree has no (M, N) input), each with and without deterministic reductions; the
finishing kernel; the parameter lists; the sm_90a module prelude and the module headers.
"""
import itertools
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from evt_backends.numba_cuda.codegen import abi, finish  # noqa: E402
from evt_backends.numba_cuda.codegen import mainloop_mma as mma  # noqa: E402
from evt_backends.numba_cuda.codegen import mainloop_simt as simt  # noqa: E402
from evt_backends.numba_cuda.codegen import mainloop_sm90 as sm90  # noqa: E402
from evt_backends.numba_cuda.codegen.epilogue_sm90 import tile_inputs  # noqa: E402
from evt_backends.numba_cuda.runtime import build  # noqa: E402
from sm90_kernels import programs as sm90_programs  # noqa: E402
from trees import case  # noqa: E402
from tests.source_dump import main  # noqa: E402

HALF, BOOL = ("float16", "bfloat16"), (True, False)


def sources():
    out = {}

    def put(name, text):
        out[name] = text

    trees = {
        "brs_rank2": case("bias_relu_stats", 0, 13, 11, 9)[0].program,
        "brs_batched": case("bias_relu_stats", 2, 13, 11, 9)[0].program,
        "brs_colaux_bf16out": case("bias_relu_stats", 2, 13, 11, 9, out="bfloat16",
                                   col_major_aux=True)[0].program,
        "activations": case("activations", 0, 13, 11, 9)[0].program,
        "activations_f32out": case("activations", 2, 13, 11, 9, out="float32")[0].program,
        "dgelu": case("dgelu", 0, 13, 11, 9)[0].program,
        "means": case("means", 3, 13, 11, 9)[0].program,
    }
    for name, (p, *_) in sm90_programs().items():
        trees["sm90_" + name] = p

    for tname, p in trees.items():
        for det in (False, True):
            for dt in ("float32", "float16", "bfloat16"):
                for tl, tiling in (("gpu", simt.GPU_TILING), ("sim", simt.SIM_TILING)):
                    put(f"simt/{tname}/{dt}/{tl}/det{det}", simt.simt_source(p, dt, tiling, det))
            for dt, ak, bk, fast in itertools.product(HALF, BOOL, BOOL, BOOL):
                put(f"mma/{tname}/{dt}/a{ak}/b{bk}/fast{fast}/det{det}",
                    mma.mma_source(p, dt, ak, bk, det, fast_mainloop=fast))
            for dt, bk, ab, bb, pp, aux in itertools.product(HALF, BOOL, BOOL, BOOL, BOOL, BOOL):
                if not (pp and aux):
                    put(f"sm90/{tname}/{dt}/b{bk}/aL{ab}/bL{bb}/det{det}" + ("/pp" if pp else "")
                        + ("/aux" if aux else ""), sm90.sm90_source(p, dt, bk, ab, bb, det, pp, aux))
                    if not (pp or aux or tile_inputs(p)):     # serial split-K (cooperative, no (M, N) input)
                        put(f"sm90/{tname}/{dt}/b{bk}/aL{ab}/bL{bb}/det{det}/split",
                            sm90.sm90_source(p, dt, bk, ab, bb, det, split=True))
        if p.reductions:
            put(f"finish/{tname}", finish.finish_source(p))
        put(f"params/{tname}", repr([abi.main_params(p), abi.finish_params(p), sm90.sm90_params(p)]))
        put(f"params_split/{tname}", repr(sm90.sm90_params(p, split=True)))
    for dt, bk in itertools.product(HALF, BOOL):
        put(f"sm90_prelude/{dt}/b{bk}", sm90.module_prelude(dt, bk))
    for sim in (False, True):
        put(f"module_header/sim{sim}", build.module_source("BODY", "KEY", simulator=sim))

    return out


if __name__ == "__main__":
    main(sources, __doc__.splitlines()[0])
