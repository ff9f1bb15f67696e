"""Source of the tensor-core fused kernel (fp16/bf16 operands, fp32 accumulate).

Mainloop: 128x128x32 CTA tile, 4 warps in 2x2, each warp 64x64 as 4x8 mma.sync.m16n8k16;
operands staged global -> shared by cp.async in a 3-stage pipeline (exactly 48 KB of static
shared memory, so no opt-in attribute is needed), read with ldmatrix.x4 (.trans where the tile
is stored MN-major). Shared tiles are XOR-swizzled by 16-byte chunk so the eight row addresses
of every ldmatrix phase hit eight different bank groups:
  K-major tile  [128 rows][32 k]  (64 B rows):  chunk ^ ((row >> 1) & 3)
  MN-major tile [32 k][128 mn]    (256 B rows): chunk ^ (row & 7)
Accumulators are 32 four-float tuples (c<mi>_<ni>), fragments tuples from ldmatrix: all SSA
values with literal indices, so they stay in registers.

Epilogue: the accumulators are staged through the (now idle) pipeline memory in row chunks and
re-read in the epilogue's SIMT layout (thread row ty = warp, 32 lanes over consecutive columns),
which gives coalesced aux loads/stores and lets the same EpilogueWriter serve both mainloops.
"""
from dataclasses import dataclass

from evt_core.errors import UnsupportedError

from .epilogue import EpilogueWriter, Layout
from .abi import arg_list, main_params


@dataclass(frozen=True)
class MmaTile:
    BM: int = 128
    BN: int = 128
    BK: int = 32
    STAGES: int = 3
    threads: int = 128
    LDS: int = 136          # staging row pitch in floats (128 + 8 keeps fragment writes spread)

    @property
    def operand_bytes(self):
        return self.BM * self.BK * 2

    @property
    def stage_bytes(self):
        return 2 * self.operand_bytes

    @property
    def smem_bytes(self):
        return self.STAGES * self.stage_bytes


MMA_TILE = MmaTile()


def mma_source(program, ab_dtype, a_kmajor, b_kmajor, deterministic, fast_mainloop=False):
    t = MMA_TILE
    epi, chunk = _epilogue_for(program, deterministic)
    mma = "mma_bf16" if ab_dtype == "bfloat16" else "mma_f16"
    body = [
        "# CTA coordinates: x over N tiles, y over M tiles, z over batches",
        "tile_n = cuda.blockIdx.x",
        "tile_m = cuda.blockIdx.y",
        "l = cuda.blockIdx.z",
        "tid = cuda.threadIdx.x",
        "warp = tid // 32",
        "lane = tid % 32",
        "wm = warp // 2    # warp tile row (64 rows)",
        "wn = warp % 2     # warp tile column (64 columns)",
        "lq = lane // 8    # which 8x8 matrix of an ldmatrix.x4 this lane addresses",
        "lr = lane % 8     # which row of it",
        "g = lane // 4     # mma fragment row group",
        "tq = lane % 4     # mma fragment column pair",
        f"m0 = tile_m * {t.BM}",
        f"n0 = tile_n * {t.BN}",
        f"pipe = cuda.shared.array({t.smem_bytes}, uint8, alignment=128)",
        "sbase = smem_base(pipe)",
        "a_g = pA + l * sAL * 2    # byte address of this batch's A",
        "b_g = pB + l * sBL * 2",
    ]
    body += [f"c{mi}_{ni} = ZERO4    # accumulator fragment (mi={mi}, ni={ni})" for mi in range(4) for ni in range(8)]
    if fast_mainloop:
        body += _fast_mainloop(a_kmajor, b_kmajor, mma)
    else:
        body += [f"ktiles = (K + {t.BK - 1}) // {t.BK}",
                 f"# prologue: fill {t.STAGES - 1} stages",
                 f"for s in range({t.STAGES - 1}):",
                 "    if s < ktiles:"]
        body += _load_tile("s", "s", a_kmajor, b_kmajor, "        ")
        body += ["    cp_async_commit()",
                 "for kt in range(ktiles):",
                 f"    cp_async_wait_{t.STAGES - 2}()    # tile kt has landed (for this thread)",
                 "    cuda.syncthreads()               # ...for every thread; stage (kt-1) is free again",
                 f"    nxt = kt + {t.STAGES - 1}",
                 "    if nxt < ktiles:"]
        body += _load_tile("nxt", f"nxt % {t.STAGES}", a_kmajor, b_kmajor, "        ")
        body += ["    cp_async_commit()",
                 f"    st = sbase + (kt % {t.STAGES}) * {t.stage_bytes}"]
        for kk in range(t.BK // 16):
            body += _compute_k16(kk, a_kmajor, b_kmajor, mma, "    ")
    body += ["cp_async_wait_0()", "", "# ---- epilogue: stage accumulators by row chunk, then the SIMT layout ----",
             "ty = warp", "tx = lane", f"stage = sbase", f"scratch = sbase + {chunk * t.LDS * 4}"]
    body += epi.prologue()
    for c in range(t.BM // chunk):
        body += _stage_chunk(c, chunk)
        body += epi.chunk(lambda i, j: f"lds(stage, (ty + {i} * 4) * {t.LDS} + tx + {j * 32})", row0=f"m0 + {c * chunk}")
    body += epi.epilogue_end()
    src = f"def evt_kernel({arg_list(main_params(program))}):\n" + "\n".join("    " + s if s else "" for s in body)
    return src + "\n"


def _epilogue_for(program, deterministic):
    """The largest row chunk whose staging buffer plus reduction scratch fits in the pipeline's
    48 KB (each row reduction parks chunk x 32 partials)."""
    t = MMA_TILE
    for chunk in (64, 32, 16):
        epi = EpilogueWriter(program, Layout(4, 32, chunk // 4, 4, rows_unrolled=False), deterministic)
        if (chunk * t.LDS + epi.scratch_size) * 4 <= t.smem_bytes:
            return epi, chunk
    raise UnsupportedError(f"{sum(1 for r in program.reductions if r.over & {'N'} and 'M' not in r.over)} "
                           "reductions over N alone do not fit the tensor-core epilogue's shared memory; "
                           "split the tree or compile with simt=True")


def _load_tile(kt, stage, a_kmajor, b_kmajor, ind):
    """cp.async of A and B k-tile `kt` into `stage`: 512 16-byte chunks each, 4 per thread.
    Temporaries get unique names (suffix): numba's SSA passes are slow on reassigned names."""
    t = MMA_TILE
    u = f"_{kt}"
    out = [f"{ind}k0{u} = {kt} * {t.BK}", f"{ind}dst{u} = sbase + ({stage}) * {t.stage_bytes}"]
    for name, kmajor, off in (("A", a_kmajor, 0), ("B", b_kmajor, t.operand_bytes)):
        mn, ext, s_mn, s_k, g = ("m0", "M", "sAM", "sAK", "a_g") if name == "A" else ("n0", "N", "sBN", "sBK", "b_g")
        for c in range(4):
            q, v = f"(tid + {c * t.threads})", f"{u}_{name}{c}"
            if kmajor:   # rows along M/N, 4 chunks of 8 k each
                out += [f"{ind}row{v} = {q} // 4", f"{ind}ch{v} = {q} % 4",
                        f"{ind}gmn{v} = {mn} + row{v}", f"{ind}gk{v} = k0{u} + ch{v} * 8",
                        f"{ind}nb{v} = min(max(K - gk{v}, 0), 8) * 2 * (gmn{v} < {ext})",
                        f"{ind}sm{v} = dst{u} + {off} + row{v} * 64 + ((ch{v} ^ ((row{v} >> 1) & 3)) * 16)"]
            else:        # rows along K, 16 chunks of 8 m/n each
                out += [f"{ind}row{v} = {q} // 16", f"{ind}ch{v} = {q} % 16",
                        f"{ind}gk{v} = k0{u} + row{v}", f"{ind}gmn{v} = {mn} + ch{v} * 8",
                        f"{ind}nb{v} = min(max({ext} - gmn{v}, 0), 8) * 2 * (gk{v} < K)",
                        f"{ind}sm{v} = dst{u} + {off} + row{v} * 256 + ((ch{v} ^ (row{v} & 7)) * 16)"]
            # With nb = 0 cp.async reads nothing, so the (possibly out-of-range) address is harmless.
            out += [f"{ind}src{v} = {g} + (gmn{v} * {s_mn} + gk{v} * {s_k}) * 2",
                    f"{ind}cp_async16(sm{v}, src{v}, nb{v})    # {name} chunk {c}: zero-filled past the edge"]
    return out


def _compute_k16(kk, a_kmajor, b_kmajor, mma, ind):
    """ldmatrix the warp's A (4 x m16) and B (8 x n8) fragments of k-step kk, then 32 mma."""
    t = MMA_TILE
    out = [f"{ind}# k16 step {kk}: fragments"]
    for name, kmajor, frags, base_mn, mn_bit, k_bit, off in (
            ("a", a_kmajor, 4, "wm * 64", "lq % 2", "lq // 2", 0),
            ("b", b_kmajor, 4, "wn * 64", "lq // 2", "lq % 2", t.operand_bytes)):
        # A's ldmatrix.x4 matrices go (m, k), (m+8, k), (m, k+8), (m+8, k+8) = a0..a3;
        # B's go (k, n), (k+8, n), (k, n+8), (k+8, n+8) = b0, b1 of n-tile 2f, then of 2f+1.
        for f in range(frags):
            mn0, v = f"{base_mn} + {f * 16} + ({mn_bit}) * 8", f"{kk}_{name}{f}"
            if kmajor:
                out += [f"{ind}r{v} = {mn0} + lr", f"{ind}kc{v} = {kk * 2} + ({k_bit})",
                        f"{ind}{name}{f} = ldmatrix_x4(st + {off} + r{v} * 64 + ((kc{v} ^ ((r{v} >> 1) & 3)) * 16))"]
            else:
                out += [f"{ind}r{v} = {kk * 16} + ({k_bit}) * 8 + lr", f"{ind}mc{v} = ({mn0}) // 8",
                        f"{ind}{name}{f} = ldmatrix_x4_trans(st + {off} + r{v} * 256 + ((mc{v} ^ (r{v} & 7)) * 16))"]
    out.append(f"{ind}# k16 step {kk}: 4 x 8 mma.sync m16n8k16 into the c<mi>_<ni> fragments")
    for mi in range(4):
        for ni in range(8):
            b0, b1 = (f"b{ni // 2}[0]", f"b{ni // 2}[1]") if ni % 2 == 0 else (f"b{ni // 2}[2]", f"b{ni // 2}[3]")
            out.append(f"{ind}c{mi}_{ni} = {mma}(a{mi}[0], a{mi}[1], a{mi}[2], a{mi}[3], {b0}, {b1}, c{mi}_{ni})")
    return out


def _stage_chunk(c, chunk):
    """Warps whose fragments cover rows [c*chunk, (c+1)*chunk) write them to the staging buffer.
    Fragment element e of (mi, ni) sits at row g (+8 for e >= 2), column 2*tq (+1 for odd e)."""
    t = MMA_TILE
    out = ["cuda.syncthreads()    # pipeline (or previous chunk) reads are done",
           f"# chunk {c}: rows {c * chunk}..{(c + 1) * chunk - 1} of the tile"]
    for mi in range(4):
        rl = f"rl{c}_{mi}"
        out.append(f"{rl} = wm * 64 + {mi * 16 - c * chunk}")
        out.append(f"if ({rl} >= 0) & ({rl} < {chunk}):")
        for ni in range(8):
            col = f"wn * 64 + {ni * 8} + 2 * tq"
            out.append(f"    sts_frag(stage, ({rl} + g) * {t.LDS} + {col}, ({rl} + g + 8) * {t.LDS} + {col}, c{mi}_{ni})")
    out.append("cuda.syncthreads()    # the chunk is staged")
    return out


# ---- fast_mainloop=True: the same pipeline with its address math hoisted out of the k-loop ----
#
# Every per-thread quantity of _load_tile / _compute_k16 that does not depend on the k-tile is
# computed once before the loop (checked term by term against those functions):
#  * cp.async: chunk c of a thread is chunk 0 shifted by 32 rows (K-major: q = tid + 128c gives
#    row = tid//4 + 32c, ch = tid%4) or by 8 k-rows (MN-major: row = tid//16 + 8c, ch = tid%16);
#    the XOR swizzle term ((row>>1)&3, resp. row&7) is the same for every c, so the shared
#    destination is chunk 0's plus c * 2048 bytes and the global source chunk 0's plus c times a
#    fixed byte stride; the k-tile only moves the global address, by BK * sK * 2 bytes, kept as
#    a running pointer per operand.
#  * ldmatrix: K-major, (r >> 1) & 3 == (lr >> 1) & 3 for every fragment f (r = base + 16f +
#    8 bit + lr, base a multiple of 16), so fragment f sits f * 1024 bytes after fragment 0 and
#    one base per k16 step remains; MN-major (.trans), r & 7 == lr, so one base per fragment
#    remains and the k16 step adds kk * 4096.
#  * stages rotate by adds and compares instead of kt % 3 in 64-bit signed arithmetic.
def _fast_mainloop(a_kmajor, b_kmajor, mma):
    t = MMA_TILE
    SB, ST = t.stage_bytes, t.STAGES
    out = [f"ktiles = (K + {t.BK - 1}) // {t.BK}", "# per-thread cp.async terms (loop-invariant)"]
    for name, kmajor, off in (("A", a_kmajor, 0), ("B", b_kmajor, t.operand_bytes)):
        mn, ext, s_mn, s_k, g = ("m0", "M", "sAM", "sAK", "a_g") if name == "A" else ("n0", "N", "sBN", "sBK", "b_g")
        x = name.lower()
        if kmajor:
            out += [f"{x}_row = tid // 4", f"{x}_ch = tid % 4",
                    f"{x}_kc = {x}_ch * 8                  # k of this thread's chunks within the tile",
                    f"{x}_rem = {ext} - ({mn} + {x}_row)    # chunk c is inside {ext} iff rem > 32c",
                    f"{x}_gp = {g} + (({mn} + {x}_row) * {s_mn} + {x}_kc * {s_k}) * 2    # chunk 0 of k-tile 0",
                    f"{x}_gc = {s_mn} * 64                   # bytes from chunk c to c+1 (32 rows)",
                    f"{x}_ss = {off} + {x}_row * 64 + (({x}_ch ^ (({x}_row >> 1) & 3)) * 16)"]
        else:
            out += [f"{x}_row = tid // 16", f"{x}_ch = tid % 16",
                    f"{x}_nb = min(max({ext} - ({mn} + {x}_ch * 8), 0), 8) * 2    # bytes inside {ext}",
                    f"{x}_gp = {g} + (({mn} + {x}_ch * 8) * {s_mn} + {x}_row * {s_k}) * 2    # chunk 0 of k-tile 0",
                    f"{x}_gc = {s_k} * 16                    # bytes from chunk c to c+1 (8 k-rows)",
                    f"{x}_ss = {off} + {x}_row * 256 + (({x}_ch ^ ({x}_row & 7)) * 16)"]
        out.append(f"{x}_gk = {s_k} * {t.BK * 2}    # bytes per k-tile")
    out.append("# per-thread ldmatrix bases (loop-invariant), relative to the stage")
    for name, kmajor, base_mn, mn_bit, k_bit, off in (
            ("a", a_kmajor, "wm * 64", "lq % 2", "lq // 2", 0),
            ("b", b_kmajor, "wn * 64", "lq // 2", "lq % 2", t.operand_bytes)):
        if kmajor:
            out.append(f"{name}_lr = {base_mn} + ({mn_bit}) * 8 + lr")
            for kk in range(t.BK // 16):
                out.append(f"{name}_ld{kk} = {off} + {name}_lr * 64 + ((({kk * 2} + ({k_bit})) ^ ((lr >> 1) & 3)) * 16)")
        else:
            for f in range(4):
                out.append(f"{name}_ld{f} = {off} + (({k_bit}) * 8 + lr) * 256 + "
                           f"(((({base_mn} + {f * 16} + ({mn_bit}) * 8) // 8) ^ lr) * 16)")
    out.append(f"# prologue: fill {ST - 1} stages")
    for s in range(ST - 1):
        out.append(f"if ktiles > {s}:")
        out += _fast_load(str(s), f"sbase + {s * SB}", a_kmajor, b_kmajor, "    ")
        out.append("cp_async_commit()")
        out += [f"a_gp = a_gp + a_gk", f"b_gp = b_gp + b_gk"]
    out += [f"rd = 0                 # byte offset of the stage read this iteration (kt % {ST})",
            f"wr = {(ST - 1) * SB}    # ... and of the one written ((kt + {ST - 1}) % {ST})",
            "for kt in range(ktiles):",
            f"    cp_async_wait_{ST - 2}()    # tile kt has landed (for this thread)",
            "    cuda.syncthreads()               # ...for every thread; stage (kt-1) is free again",
            f"    if kt + {ST - 1} < ktiles:"]
    out += _fast_load(f"(kt + {ST - 1})", "sbase + wr", a_kmajor, b_kmajor, "        ")
    out += ["    cp_async_commit()",
            "    a_gp = a_gp + a_gk",
            "    b_gp = b_gp + b_gk",
            "    st = sbase + rd"]
    for kk in range(t.BK // 16):
        out.append(f"    # k16 step {kk}: fragments")
        for name, kmajor in (("a", a_kmajor), ("b", b_kmajor)):
            fn = "ldmatrix_x4" if kmajor else "ldmatrix_x4_trans"
            for f in range(4):
                addr = f"st + {name}_ld{kk} + {f * 1024}" if kmajor else f"st + {name}_ld{f} + {kk * 4096}"
                out.append(f"    {name}{f} = {fn}({addr})")
        out.append(f"    # k16 step {kk}: 4 x 8 mma.sync m16n8k16 into the c<mi>_<ni> fragments")
        for mi in range(4):
            for ni in range(8):
                b0, b1 = (f"b{ni // 2}[0]", f"b{ni // 2}[1]") if ni % 2 == 0 else (f"b{ni // 2}[2]", f"b{ni // 2}[3]")
                out.append(f"    c{mi}_{ni} = {mma}(a{mi}[0], a{mi}[1], a{mi}[2], a{mi}[3], {b0}, {b1}, c{mi}_{ni})")
    out += [f"    rd = rd + {SB} if rd < {(ST - 1) * SB} else 0",
            f"    wr = wr + {SB} if wr < {(ST - 1) * SB} else 0"]
    return out


def _fast_load(kt, dst, a_kmajor, b_kmajor, ind):
    """cp.async of k-tile `kt` (a_gp/b_gp point at its chunk 0) into the stage at `dst`."""
    t = MMA_TILE
    out = []
    for x, kmajor in (("a", a_kmajor), ("b", b_kmajor)):
        if kmajor:
            out.append(f"{ind}{x}_kb = min(max(K - {kt} * {t.BK} - {x}_kc, 0), 8) * 2    # bytes inside K")
        for c in range(4):
            nb = (f"{x}_kb * ({x}_rem > {32 * c})" if kmajor
                  else f"{x}_nb * ({kt} * {t.BK} + {x}_row + {8 * c} < K)")
            src = f"{x}_gp" if c == 0 else f"{x}_gp + {x}_gc * {c}"
            out.append(f"{ind}cp_async16({dst} + {x}_ss + {c * 2048}, {src}, {nb})    # {x.upper()} chunk {c}")
    return out
