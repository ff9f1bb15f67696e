"""Source of the SIMT fused kernel: fp32 FMA mainloop over (L, M, N, K) tiles, then the epilogue.

Used for fp32 operands, for fp16/bf16 operands whose layout or alignment the tensor-core path
cannot take (cp.async needs 16-byte aligned rows), and by the CUDA simulator. Any strides work:
A and B are read element by element through (sL, sM, sK) / (sL, sK, sN), converted to fp32 and
staged in shared memory; tiles past M, N or K are zero-filled.
"""
from dataclasses import dataclass

from .epilogue import EpilogueWriter, Layout
from .abi import arg_list, main_params

_LOADERS = {"float32": "ld_f32", "float16": "ld_f16", "bfloat16": "ld_bf16"}


@dataclass(frozen=True)
class SimtTiling:
    TY: int = 16
    TX: int = 16
    RM: int = 4
    RN: int = 4
    BK: int = 16

    @property
    def BM(self):
        return self.TY * self.RM

    @property
    def BN(self):
        return self.TX * self.RN

    @property
    def threads(self):
        return self.TY * self.TX


GPU_TILING = SimtTiling()
# The simulator runs one Python thread per CUDA thread: 16 threads keep a 16^3 problem ~1 s.
SIM_TILING = SimtTiling(TY=4, TX=4, RM=2, RN=2, BK=4)


def simt_source(program, ab_dtype, tiling, deterministic):
    """(source text, tiling) of the SIMT kernel `evt_kernel` for `program`."""
    t = tiling
    lay = Layout(t.TY, t.TX, t.RM, t.RN, rows_unrolled=True)
    epi = EpilogueWriter(program, lay, deterministic)
    ld = _LOADERS[ab_dtype]
    body = [
        "# CTA coordinates: x over N tiles, y over M tiles, z over batches",
        "tile_n = cuda.blockIdx.x",
        "tile_m = cuda.blockIdx.y",
        "l = cuda.blockIdx.z",
        "tid = cuda.threadIdx.x",
        f"ty = tid // {t.TX}",
        f"tx = tid - ty * {t.TX}",
        f"m0 = tile_m * {t.BM}",
        f"n0 = tile_n * {t.BN}",
        f"a_sh = cuda.shared.array(({t.BK}, {t.BM}), float32)",
        f"b_sh = cuda.shared.array(({t.BK}, {t.BN}), float32)",
        f"scratch = smem_base(cuda.shared.array({epi.scratch_size}, float32))",
        f"acc = cuda.local.array({t.RM * t.RN}, float32)",
    ]
    body += [f"acc[{e}] = ZERO" for e in range(t.RM * t.RN)]
    body += [
        "a_lo = l * sAL",
        "b_lo = l * sBL",
        f"for k0 in range(0, K, {t.BK}):",
        f"    # stage A[m0:m0+{t.BM}, k0:k0+{t.BK}] as fp32 (k fastest: coalesced for row-major A)",
        f"    for e in range(tid, {t.BM * t.BK}, {t.threads}):",
        f"        r = e // {t.BK}",
        f"        c = e - r * {t.BK}",
        "        gm = m0 + r",
        "        gk = k0 + c",
        f"        a_sh[c, r] = {ld}(pA, a_lo + gm * sAM + gk * sAK) if gm < M and gk < K else ZERO",
        f"    # stage B[k0:k0+{t.BK}, n0:n0+{t.BN}] (n fastest)",
        f"    for e in range(tid, {t.BK * t.BN}, {t.threads}):",
        f"        r = e // {t.BN}",
        f"        c = e - r * {t.BN}",
        "        gk = k0 + r",
        "        gn = n0 + c",
        f"        b_sh[r, c] = {ld}(pB, b_lo + gk * sBK + gn * sBN) if gk < K and gn < N else ZERO",
        "    cuda.syncthreads()",
        f"    for kk in range({t.BK}):",
    ]
    body += [f"        a{i} = a_sh[kk, ty + {i * t.TY}]" for i in range(t.RM)]
    body += [f"        b{j} = b_sh[kk, tx + {j * t.TX}]" for j in range(t.RN)]
    body += [f"        acc[{i * t.RN + j}] += a{i} * b{j}" for i in range(t.RM) for j in range(t.RN)]
    body += ["    cuda.syncthreads()", "", "# ---- epilogue ----"]
    body += epi.prologue()
    body += epi.chunk(lambda i, j: f"acc[{i} * {t.RN} + {j}]")
    body += epi.epilogue_end()
    params = main_params(program)
    src = f"def evt_kernel({arg_list(params)}):\n" + "\n".join("    " + s if s else "" for s in body) + "\n"
    return src
