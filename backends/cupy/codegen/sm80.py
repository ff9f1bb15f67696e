"""The sm_80+ mainloop: a multi-stage cp.async pipeline into padded shared memory, ldmatrix and
mma.sync m16n8k16 for fp16/bf16, exact fp32 FMA for fp32 inputs (no tf32), then the fused
epilogue on the accumulator fragment.

It is also the fallback for every layout TMA cannot take: an operand whose rows are not 16-byte
aligned or whose contiguous axis is not the expected one is loaded by a scalar, bounds-checked
loader into the same pipeline (slower, never wrong).

Shared-memory rows are padded by 16 bytes: 8 consecutive rows then start in 8 different
16-byte bank groups, so ldmatrix and the fp32 column reads are conflict-free.
"""
from .common import module_source
from .fragments import FragmentMap, column_group_body, combine, declare_partials, smem_floats
from .prelude import STORAGE, mma_sync


def sm80_geometry(spec, cfg):
    """Derived sizes: elements per 16 bytes, paddings, per-warp tile, fragment counts."""
    item = 4 if spec.dtype == "float32" else 2
    epc = 16 // item
    wm_rows, wn_cols = cfg.bm // cfg.warps_m, cfg.bn // cfg.warps_n
    g = dict(item=item, epc=epc, pad=epc, WM=wm_rows, WN=wn_cols, MI=wm_rows // 16, NI=wn_cols // 8,
             NT=32 * cfg.warps_m * cfg.warps_n)
    # two CTAs per SM (128 registers) only when the accumulators leave room for it
    g["min_blocks"] = 2 if item == 2 and g["MI"] * g["NI"] <= 16 else 1
    g["PA"] = cfg.bk + epc
    g["PB"] = cfg.bk + epc if spec.b_kmajor else cfg.bn + epc
    g["A_STAGE"] = cfg.bm * g["PA"]
    g["B_STAGE"] = cfg.bn * g["PB"] if spec.b_kmajor else cfg.bk * g["PB"]
    return g


def _fragment_map(cfg, g):
    WM, WN = g["WM"], g["WN"]
    return FragmentMap(
        slots=g["MI"] * 2,
        slot_row=lambda s: f"m0 + wm * {WM} + (({s}) >> 1) * 16 + gq + 8 * (({s}) & 1)",
        slot_row_in_block=lambda s: f"wm * {WM} + (({s}) >> 1) * 16 + gq + 8 * (({s}) & 1)",
        slot_acc=lambda s, e: f"acc[({s}) >> 1][ni][2 * (({s}) & 1) + {e}]",
        col_var="ni", col_in_tile=f"wn * {WN} + ni * 8 + 2 * q", n0="n0", m0_block="m0", rb="mt", cb="nt",
        tile_cols=cfg.bn, rows_per_block=cfg.bm, row_warps=cfg.warps_n, row_warp_id="wn",
        col_warps=cfg.warps_m, col_warp_id="wm", group_threads=g["NT"], group_tid="threadIdx.x",
        group_warp="warp", group_warps=cfg.warps_m * cfg.warps_n, sync="__syncthreads();")


def smem_bytes(program, spec, cfg):
    g = sm80_geometry(spec, cfg)
    _, red = smem_floats(program, _fragment_map(cfg, g))
    return cfg.stages * (g["A_STAGE"] + g["B_STAGE"]) * g["item"] + 4 * red


def _loader(name, mode, rows, cols, pitch, g):
    """Device function copying a rows x cols tile (cols contiguous in shared memory) from a
    global tile at (r0, c0) with strides (sr, sc) and bounds (rlim, clim); out-of-bounds
    elements are zero so they add nothing to the dot products."""
    T = "T"
    if mode == "async":
        ch = cols // g["epc"]
        body = (f"  for (int i = threadIdx.x; i < {rows * ch}; i += {g['NT']}) {{\n"
                f"    const int r = i / {ch}, c = (i % {ch}) * {g['epc']};\n"
                f"    const int gr = r0 + r, gc = c0 + c;\n"
                f"    const bool ok = gr < rlim && gc < clim;  // K%EPC == 0 keeps a chunk all-in or all-out\n"
                f"    const {T}* src = ok ? base + (long long)gr * sr + gc : base;\n"
                f"    evt_cp_async16(evt_smem_u32(dst + r * {pitch} + c), src, ok ? 16 : 0);\n  }}\n")
    else:
        body = (f"  for (int i = threadIdx.x; i < {rows * cols}; i += {g['NT']}) {{\n"
                f"    const int r = i / {cols}, c = i % {cols};\n"
                f"    const int gr = r0 + r, gc = c0 + c;\n"
                f"    dst[r * {pitch} + c] = (gr < rlim && gc < clim) ? base[(long long)gr * sr + (long long)gc * sc] : ({T})0;\n  }}\n")
    return (f"// {mode} loader: {rows}x{cols} tile\n"
            f"__device__ __forceinline__ void {name}({T}* dst, const {T}* base, int r0, int c0, int rlim, int clim, "
            f"long long sr, long long sc) {{\n{body}}}\n")


def _compute_mma(spec, cfg, g):
    MI, NI, WM, WN, PA, PB = g["MI"], g["NI"], g["WM"], g["WN"], g["PA"], g["PB"]
    if spec.b_kmajor:
        bload = (f"      const T* p = Bs + (wn * {WN} + ni * 8 + (lane & 7) + (lane >> 4) * 8) * {PB} + kk + ((lane >> 3) & 1) * 8;\n"
                 f"      evt_ldmatrix_x4(evt_smem_u32(p), bf[ni][0], bf[ni][1], bf[ni + 1][0], bf[ni + 1][1]);\n")
    else:
        bload = (f"      const T* p = Bs + (kk + (lane & 7) + ((lane >> 3) & 1) * 8) * {PB} + wn * {WN} + ni * 8 + (lane >> 4) * 8;\n"
                 f"      evt_ldmatrix_x4_trans(evt_smem_u32(p), bf[ni][0], bf[ni][1], bf[ni + 1][0], bf[ni + 1][1]);\n")
    return (f"  #pragma unroll\n  for (int kk = 0; kk < {cfg.bk}; kk += 16) {{\n"
            f"    u32 af[{MI}][4], bf[{NI}][2];\n"
            f"    #pragma unroll\n    for (int mi = 0; mi < {MI}; ++mi) {{\n"
            f"      const T* p = As + (wm * {WM} + mi * 16 + (lane & 15)) * {PA} + kk + (lane >> 4) * 8;\n"
            f"      evt_ldmatrix_x4(evt_smem_u32(p), af[mi][0], af[mi][1], af[mi][2], af[mi][3]);\n    }}\n"
            f"    #pragma unroll\n    for (int ni = 0; ni < {NI}; ni += 2) {{\n{bload}    }}\n"
            f"    #pragma unroll\n    for (int mi = 0; mi < {MI}; ++mi)\n"
            f"      #pragma unroll\n      for (int ni = 0; ni < {NI}; ++ni)\n"
            f"        evt_mma(acc[mi][ni], af[mi][0], af[mi][1], af[mi][2], af[mi][3], bf[ni][0], bf[ni][1]);\n  }}\n")


def _compute_fma(spec, cfg, g):
    MI, NI, WM, WN, PA, PB = g["MI"], g["NI"], g["WM"], g["WN"], g["PA"], g["PB"]
    bexpr = (f"Bs[(wn * {WN} + ni * 8 + 2 * q + e) * {PB} + kk]" if spec.b_kmajor
             else f"Bs[kk * {PB} + wn * {WN} + ni * 8 + 2 * q + e]")
    return (f"  // exact fp32: the same fragment layout as mma.sync, computed with FMAs\n"
            f"  #pragma unroll 4\n  for (int kk = 0; kk < {cfg.bk}; ++kk) {{\n"
            f"    float av[{MI}][2], bv[{NI}][2];\n"
            f"    #pragma unroll\n    for (int mi = 0; mi < {MI}; ++mi)\n"
            f"      #pragma unroll\n      for (int h = 0; h < 2; ++h) av[mi][h] = As[(wm * {WM} + mi * 16 + gq + 8 * h) * {PA} + kk];\n"
            f"    #pragma unroll\n    for (int ni = 0; ni < {NI}; ++ni)\n"
            f"      #pragma unroll\n      for (int e = 0; e < 2; ++e) bv[ni][e] = {bexpr};\n"
            f"    #pragma unroll\n    for (int mi = 0; mi < {MI}; ++mi)\n"
            f"      #pragma unroll\n      for (int ni = 0; ni < {NI}; ++ni)\n"
            f"        #pragma unroll\n        for (int h = 0; h < 2; ++h)\n"
            f"          #pragma unroll\n          for (int e = 0; e < 2; ++e)\n"
            f"            acc[mi][ni][2 * h + e] = fmaf(av[mi][h], bv[ni][e], acc[mi][ni][2 * h + e]);\n  }}\n")


def generate(program, spec, cfg):
    """CUDA C++ source of the sm80 kernel `evt_main` plus evt_init/evt_finish."""
    g = sm80_geometry(spec, cfg)
    fm = _fragment_map(cfg, g)
    smem, _ = smem_floats(program, fm)
    T = STORAGE[spec.dtype]
    S = cfg.stages
    if spec.b_kmajor:   # B tile rows are n, columns k
        bcall = "load_b(Bs_, Bg, n0, k0, a.N, a.K, a.b_sN, a.b_sK);"
        bdims = (cfg.bn, cfg.bk)
    else:
        bcall = "load_b(Bs_, Bg, k0, n0, a.K, a.N, a.b_sK, a.b_sN);"
        bdims = (cfg.bk, cfg.bn)
    compute = _compute_fma(spec, cfg, g) if spec.dtype == "float32" else _compute_mma(spec, cfg, g)
    header = (f"// evt sm80 kernel: {spec.dtype}, tile {cfg.label()}, A {spec.a_load}, B {spec.b_load} "
              f"{'K-major' if spec.b_kmajor else 'N-major'}\n")
    kernel = "\n".join([
        f"typedef {T} T;",
        "" if spec.dtype == "float32" else mma_sync(spec.dtype),
        _loader("load_a", spec.a_load, cfg.bm, cfg.bk, g["PA"], g),
        _loader("load_b", spec.b_load, bdims[0], bdims[1], g["PB"], g),
        f"""extern "C" __global__ void __launch_bounds__({g['NT']}, {g['min_blocks']}) evt_main(const __grid_constant__ EpiArgs a) {{
  extern __shared__ __align__(16) unsigned char smem[];
  T* sA = (T*)smem;                                  // [{S}][{cfg.bm}][{g['PA']}]
  T* sB = sA + {S * g['A_STAGE']};                   // [{S}] B tiles
  float* red_smem = (float*)(sB + {S * g['B_STAGE']});  // reduction combine buffers
  const u32 red_s = evt_smem_u32(red_smem);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int wm = warp / {cfg.warps_n}, wn = warp % {cfg.warps_n};
  const int gq = lane >> 2, q = lane & 3;            // fragment row group and column pair
  int l, mt, nt;
  evt_tile_coords(a, blockIdx.x, {cfg.group_m}, l, mt, nt);
  const int m0 = mt * {cfg.bm}, n0 = nt * {cfg.bn};
  const T* Ag = a.A + (long long)l * a.a_sL;
  const T* Bg = a.B + (long long)l * a.b_sL;
  float acc[{g['MI']}][{g['NI']}][4];
  #pragma unroll
  for (int i = 0; i < {g['MI']}; ++i)
    #pragma unroll
    for (int j = 0; j < {g['NI']}; ++j)
      #pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  const int KB = (a.K + {cfg.bk - 1}) / {cfg.bk};
  // prologue: fill stages 0..S-2 (one commit group per stage, empty when past K)
  for (int s = 0; s < {S - 1}; ++s) {{
    if (s < KB) {{
      const int k0 = s * {cfg.bk};
      T* As_ = sA + s * {g['A_STAGE']}; T* Bs_ = sB + s * {g['B_STAGE']};
      load_a(As_, Ag, m0, k0, a.M, a.K, a.a_sM, a.a_sK);
      {bcall}
    }}
    evt_cp_async_commit();
  }}
  for (int kb = 0; kb < KB; ++kb) {{
    evt_cp_async_wait<{S - 2}>();   // stage kb has landed
    __syncthreads();               // ...for every thread, and stage kb-1 is free again
    {{
      const int nk = kb + {S - 1};
      if (nk < KB) {{
        const int k0 = nk * {cfg.bk}, s = nk % {S};
        T* As_ = sA + s * {g['A_STAGE']}; T* Bs_ = sB + s * {g['B_STAGE']};
        load_a(As_, Ag, m0, k0, a.M, a.K, a.a_sM, a.a_sK);
        {bcall}
      }}
      evt_cp_async_commit();
    }}
    const T* As = sA + (kb % {S}) * {g['A_STAGE']};
    const T* Bs = sB + (kb % {S}) * {g['B_STAGE']};
{compute}  }}
  evt_cp_async_wait<0>();
  // ---- fused epilogue ----
{declare_partials(program, fm)}
  #pragma unroll
  for (int ni = 0; ni < {g['NI']}; ++ni) {{
    const int n = n0 + wn * {g['WN']} + ni * 8 + 2 * q;
{column_group_body(program, fm, smem)}
  }}
{combine(program, fm, smem)}
}}
"""])
    return module_source(program, spec, header, kernel)
