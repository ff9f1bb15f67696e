"""The sm_90a mainloop (hopper-gemm-notes.md §5-9): persistent, warp-specialised, TMA loads into
a 128B-swizzled full/empty mbarrier ring, wgmma m64nBNk16 from shared memory, and a TMA-store
epilogue for the main M x N output.

CTA = 3 warpgroups. WG0 is the producer (one thread issues every TMA load; setmaxnreg 40); WG1
and WG2 are consumers, each owning 64 rows x BN columns of the 128 x BN tile (setmaxnreg 232).
Tiles are visited persistently in grouped order; while the consumers run a tile's epilogue the
producer is already filling the ring for their next tile, which is the overlap we get without
ping-pong scheduling. Every mbarrier wait is bounded (prelude WATCHDOG).
"""
from ...gpu.sm90 import BK, BM
from .common import module_source
from .fragments import (FragmentMap, col_run_begin, col_run_end, column_group_body, combine, declare_partials,
                        smem_floats)
from .plan import tile_vector_bytes, tile_vectors, tma_outputs
from . import sm90_splitk as splitk
from .sm90_io import (_aux_consumer, _aux_init, _aux_producer, _aux_ring_producer, _store, _tile_vectors, _tma_load,
                      aux_geometry, aux_ring_address, aux_stages, ring_stage_bytes)

A_BYTES = BM * BK * 2
STAGING_BYTES = 64 * 128 * 2     # per consumer WG: 64 rows x 128 columns of 16-bit output


# the thread's (row, column pair) word inside a 64 x 64 128B-swizzled panel (notes §9); the
# same address serves the staged outputs and the aux_tma inputs, with no bank conflicts
_PANEL_WORD = "(16 * w + gq + 8 * s) * 128 + ((({c} & 7) ^ gq) << 4) + 4 * q"


def _aux_panel(spec, cfg, half, buffer_base):
    """Shared-space address of input 0's panel for the fragment's m-half `half` and the column
    group j's 64-column panel: in the ring's aux stages (aux_ring) or the aux buffer."""
    if spec.aux_ring:
        return aux_ring_address(spec, cfg, f"{half} * {cfg.bn // 64} + (j >> 3)")
    return f"{buffer_base} + (j >> 3) * 8192"


def _aux_stride(spec, cfg):
    """Bytes from one aux input's panel to the next input's: adjacent panels of a ring group, or
    whole input tiles in the aux buffer."""
    return 8192 if spec.aux_ring else aux_geometry(spec, cfg)[4]


def _fragment_map(cfg, spec, program, aux_words=None):
    """The cooperative warpgroup's fragment. aux_words: a C expression of input x's 32-bit word
    of the pair (x -> expr): the aux_tma inputs come to evt_epilogue as values read earlier
    (the overlapped schedule's preloaded ring words), not as a shared-memory address."""
    nt = len(tma_outputs(spec))
    stage = " ".join(f"evt_sts_u32(stgb_s + {o * 8192} + {_PANEL_WORD.format(c='jj')}, tma_word[{o}]);"
                     for o in range(nt))
    aux = ""
    if spec.aux_tma and aux_words:
        aux = "".join(f", {aux_words(x)}" for x in range(len(spec.aux_tma)))
    elif spec.aux_tma:
        aux = f", {_aux_panel(spec, cfg, 'wg', 'auxw')} + {_PANEL_WORD.format(c='j')}, {_aux_stride(spec, cfg)}"
    if tile_vectors(program, spec):
        aux += ", vs, 8 * j + 2 * q, 16 * w + gq + 8 * s"
    return FragmentMap(
        slots=2,
        slot_row=lambda s: f"m0 + 64 * wg + 16 * w + gq + 8 * ({s})",
        slot_row_in_block=lambda s: f"16 * w + gq + 8 * ({s})",
        slot_acc=lambda s, e: f"d[4 * j + 2 * ({s}) + {e}]",
        col_var="j", col_in_tile="8 * j + 2 * q", n0="n0", m0_block="m0 + 64 * wg", rb="mt * 2 + wg", cb="nt",
        tile_cols=cfg.bn, rows_per_block=64, row_warps=1, row_warp_id="0", col_warps=4, col_warp_id="w",
        group_threads=128, group_tid="tid", group_warp="w", group_warps=4,
        sync="evt_named_bar(1 + wg, 128);", stage_word=stage, tma_words=max(1, nt), aux_args=aux)


def _pp_fragment_map(cfg, spec, program):
    """Ping-pong: one warpgroup holds the whole bm x bn tile as bm/64 m64nBN fragments, and the
    epilogue walks them one m-half `h` at a time (a C loop, unrolled), each exactly like a
    cooperative warpgroup's 64 rows. The staged output goes through 64 x 64 swizzled panels,
    double-buffered (`stgb`)."""
    nt = len(tma_outputs(spec))
    stage = " ".join(f"evt_sts_u32(stgb_s + {o * 8192} + {_PANEL_WORD.format(c='jj')}, tma_word[{o}]);"
                     for o in range(nt))
    half = cfg.bn // 2
    mh = cfg.bm // 64
    aux = ""
    if spec.aux_tma:
        aux = f", {_aux_panel(spec, cfg, 'h', f'auxw + h * {cfg.bn // 64 * 8192}')} + {_PANEL_WORD.format(c='j')}, " \
              f"{_aux_stride(spec, cfg)}"
    if tile_vectors(program, spec):
        aux += ", vs, 8 * j + 2 * q, 64 * h + 16 * w + gq + 8 * s"
    return FragmentMap(
        slots=2,
        slot_row=lambda s: f"m0 + 64 * h + 16 * w + gq + 8 * ({s})",
        slot_row_in_block=lambda s: f"16 * w + gq + 8 * ({s})",
        slot_acc=lambda s, e: f"d[{half} * h + 4 * j + 2 * ({s}) + {e}]",
        col_var="j", col_in_tile="8 * j + 2 * q", n0="n0", m0_block="m0 + 64 * h", rb=f"mt * {mh} + h", cb="nt",
        tile_cols=cfg.bn, rows_per_block=64, row_warps=1, row_warp_id="0", col_warps=4, col_warp_id="w",
        group_threads=128, group_tid="tid", group_warp="w", group_warps=4,
        sync="evt_named_bar(1 + wg, 128);", stage_word=stage, tma_words=max(1, nt), aux_args=aux)


def _fmap(cfg, spec, program):
    return _pp_fragment_map(cfg, spec, program) if cfg.pingpong else _fragment_map(cfg, spec, program)


def staging_bytes(cfg, outputs=1):
    """Per consumer warpgroup and TMA-stored output: two 64 x 64 panels (a double buffer), in
    both schedules."""
    return (2 * 8192 if cfg.pingpong else STAGING_BYTES) * outputs


def smem_layout(program, spec, cfg):
    """Byte offsets inside the 1024-aligned dynamic shared memory, and the total to request."""
    a_bytes = (cfg.bm if cfg.pingpong else BM) * BK * 2
    stage = ring_stage_bytes(cfg)
    nt = len(tma_outputs(spec))
    _, red_floats = smem_floats(program, _fmap(cfg, spec, program))
    off = {"stage": stage, "b": a_bytes, "staging": cfg.stages * stage}
    off["aux"] = off["staging"] + 2 * staging_bytes(cfg, nt)       # 1024-aligned: all multiples of 8 KB
    nb, _, _, buf, _ = aux_geometry(spec, cfg)
    own_buffer = spec.aux_tma and not spec.aux_ring
    off["aux_buf"] = buf
    off["red"] = off["aux"] + (nb * buf if own_buffer else 0)
    off["red_floats"] = red_floats
    off["vec"] = (off["red"] + 2 * 4 * red_floats + 15) // 16 * 16      # tile vectors, per consumer WG
    off["vec_bytes"] = tile_vector_bytes(program, spec)
    off["bars"] = off["vec"] + 2 * off["vec_bytes"]
    off["bars"] = (off["bars"] + 7) // 8 * 8
    # ring: full[s], empty[s]; aux_tma: aux_full[b], aux_empty[b] after them
    off["abars"] = off["bars"] + 16 * cfg.stages
    off["total"] = off["abars"] + (16 * nb if own_buffer else 0) + 1024    # + slack to align the base to 1024
    return off


def smem_bytes(program, spec, cfg):
    return smem_layout(program, spec, cfg)["total"]


def _wgmma(spec, cfg):
    t = {"float16": "f16", "bfloat16": "bf16"}[spec.dtype]
    nacc = cfg.bn // 2
    regs = ", ".join(f"%{i}" for i in range(nacc))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nacc))
    tb = 0 if spec.b_kmajor else 1     # imm-trans-b: 1 = N-major B, the (K, N) row-major input
    ta = 0 if spec.a_kmajor else 1     # imm-trans-a: 1 = M-major A (a weight gradient's activations)
    return (f"// d += A(64x16, {'K' if spec.a_kmajor else 'M'}-major) * B(16x{cfg.bn}); scale_d == 0 starts from zero\n"
            f"__device__ __forceinline__ void evt_wgmma(float* d, u64 da, u64 db, int scale_d) {{\n"
            f"  asm volatile(\"{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nacc + 2}, 0;\\n"
            f"wgmma.mma_async.sync.aligned.m64n{cfg.bn}k16.f32.{t}.{t} {{{regs}}}, %{nacc}, %{nacc + 1}, p, 1, 1, {ta}, {tb};\\n}}\\n\"\n"
            f"    : {outs}\n    : \"l\"(da), \"l\"(db), \"r\"(scale_d));\n}}\n")


def _a_loads(spec, rows):
    """The producer's TMA loads of one stage's A tile (`rows` x BK). K-major A is one box; an
    M-major A is rows/64 panels of 64 M-columns x BK K-rows, 8 KB apart, the layout B takes when
    it is N-major. Either way a 64-row slice of the tile starts 8 KB after the previous one,
    which is what the consumers' `sa + 8192 * half` addressing relies on."""
    if spec.a_kmajor:
        return _tma_load("tmA", spec.a_batched, "sa", "k0", "m0", "fb")
    return (f"for (int p = 0; p < {rows // 64}; ++p) "
            + _tma_load("tmA", spec.a_batched, "sa + p * 8192", "m0 + 64 * p", "k0", "fb"))


def _a_desc(spec, base):
    """wgmma descriptor of the 64 x 16 A slice for k16 step `k` starting at shared address `base`:
    K-major rows advance 32 bytes per step; an M-major panel advances 16 K-rows (2 KB) per step,
    encoded as N-major B is (leading byte offset 8 KB, stride byte offset 1 KB)."""
    if spec.a_kmajor:
        return f"evt_wgmma_desc({base} + 32 * k, 16, 1024)"
    return f"evt_wgmma_desc({base} + 2048 * k, 8192, 1024)"


def _map_params(spec):
    """Kernel parameters after tmA, tmB, tmD: the further TMA-stored outputs' maps (tmD1, ...)
    and the aux_tma inputs' maps (tmX0, ...), in that order (runtime/launcher.py passes them)."""
    nt = len(tma_outputs(spec))
    return ("".join(f", const __grid_constant__ TmaDesc tmD{o}" for o in range(1, nt))
            + "".join(f", const __grid_constant__ TmaDesc tmX{x}" for x in range(len(spec.aux_tma)))
            + splitk.kernel_params(spec))


def _kernel_head(spec, cfg, off, empty_arrivals, helpers=""):
    """The wgmma helper, the kernel signature and the shared-memory/mbarrier set-up both sm90
    schedules share; `empty_arrivals` consumer arrivals release a ring slot (2 cooperative
    warpgroups share each k-block, 1 in ping-pong, where each owns whole tiles). helpers:
    further device functions, between the wgmma helper and the kernel."""
    S = cfg.stages
    return f"""{_wgmma(spec, cfg)}{helpers}
extern "C" __global__ void __launch_bounds__(384, 1) evt_main(const __grid_constant__ EpiArgs a,
    const __grid_constant__ TmaDesc tmA, const __grid_constant__ TmaDesc tmB, const __grid_constant__ TmaDesc tmD{_map_params(spec)}) {{
  extern __shared__ unsigned char smem_raw[];{splitk.shared_decl(spec)}
  // swizzle atoms need 1024-B bases. Shared memory is addressed only through 32-bit shared-space
  // addresses (st.shared / ld.shared / TMA / mbarrier operands): generic pointers into dynamic
  // shared memory compiled to generic ST/LD
  const u32 sbase = (evt_smem_addr(smem_raw) + 1023u) & ~1023u;
  const u32 bars = sbase + {off['bars']};        // full[s] at bars + 8s, empty[s] at bars + 8(S + s)
  const u32 abars = sbase + {off['abars']};      // aux_tma: aux_full[b] at abars + 8b, aux_empty[b] after them
  if (threadIdx.x == 0) {{
    for (int s = 0; s < {S}; ++s) {{ evt_mbar_init(bars + 8 * s, 1); evt_mbar_init(bars + 8 * ({S} + s), {empty_arrivals}); }}{_aux_init(spec, cfg)}
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    evt_fence_async_smem();
  }}
  __syncthreads();
  const int wgid = threadIdx.x / 128, tid = threadIdx.x % 128;"""


def _producer(program, spec, cfg, off, bm, a_load, b_loads):
    """The producer warpgroup, the same in both schedules: one thread walks this CTA's tiles in
    order and streams each tile's A and B k-blocks (and, with aux_tma, its aux panels) through
    the ring; the consumer side of the ring decides who releases a slot."""
    S, BN, BK = cfg.stages, cfg.bn, cfg.bk
    loop, k_first, k_limit = splitk.unit_loop(spec, BK, "      ")
    aux_kb = (f"      const int auxkb = min((a.K + {BK - 1}) / {BK}, {S}) - 1;   // aux buffer: when its loads go\n"
              if spec.aux_tma and not spec.aux_ring else "")
    return f"""  if (wgid == 0) {{
    // ---- producer warpgroup: one thread streams every tile's A and B k-blocks through the ring ----
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (tid == 0) {{
      int s = 0; u32 ph = 0;
{aux_kb}      int it = 0;                                        // index of the tile among this CTA's tiles
      {loop}
        int l, mt, nt;
        evt_tile_coords(a, t, {cfg.group_m}, l, mt, nt);
        const int m0 = mt * {bm}, n0 = nt * {BN};
        for (int k0 = {k_first}, kb = 0; k0 < {k_limit}; k0 += {BK}, ++kb) {{
          evt_mbar_wait(bars + 8 * ({S} + s), ph ^ 1);     // the consumer side released slot s
          const u32 fb = bars + 8 * s;
          evt_mbar_expect_tx(fb, {off['stage']});          // full boxes, zero-filled past the edges
          const u32 sa = sbase + s * {off['stage']}, sb = sa + {off['b']};
          {a_load}
          {b_loads}
          if (++s == {S}) {{ s = 0; ph ^= 1; }}{_aux_producer(program, spec, cfg, off)}
        }}{_aux_ring_producer(program, spec, cfg, "m0")}
      }}
    }}
  }} else {{"""


def _b_operand(spec, BN):
    """(the producer's TMA loads of one B stage, the consumer's wgmma descriptor of B at k16 step k)."""
    if spec.b_kmajor:
        return (_tma_load("tmB", spec.b_batched, "sb", "k0", "n0", "fb"),
                "evt_wgmma_desc(sb + 32 * k, 16, 1024)")
    # (K, N) row-major: 64-column panels of 64 K rows, 8 KB apart
    return (f"for (int p = 0; p < {BN // 64}; ++p) "
            + _tma_load("tmB", spec.b_batched, "sb + p * 8192", "n0 + 64 * p", "k0", "fb"),
            "evt_wgmma_desc(sb + 2048 * k, 8192, 1024)")


def _column_loop(program, spec, fm, red_layout, staged, nt, BN, row0, buf, panel_index=None):
    """A consumer's epilogue over one 64-row fragment (rows from `row0`), 8 columns at a time.
    Staged (TMA-stored outputs): 64 x 64 panels through a double buffer (the warpgroup's 16 KB
    of staging per output), each panel waiting only for the store issued two panels earlier,
    across tiles too. `buf` is the panel counter that picks the buffer: the column panel `c`,
    or (ping-pong, several fragments per tile) `g`, defined as `panel_index`."""
    if not staged:
        return f"""  #pragma unroll
  for (int j = 0; j < {BN // 8}; ++j) {{
{group_body(program, fm, red_layout, staged)}
  }}"""
    counter = f"\n    const int {buf} = {panel_index};" if panel_index else ""
    return f"""  #pragma unroll
  for (int c = 0; c < {BN // 64}; ++c) {{        // 64 x 64 panels, staging double-buffered{counter}
{panel_open(program, nt, buf)}
    #pragma unroll
    for (int jj = 0; jj < 8; ++jj) {{
      const int j = c * 8 + jj;
{group_body(program, fm, red_layout, staged)}
    }}
{panel_close(program, spec, fm, red_layout, nt, row0, buf)}
  }}"""


def panel_open(program, nt, buf):
    """Staged outputs, before panel c's column groups: its staging buffer ({buf} & 1) is free
    once the store issued two panels earlier has read it; the column partials start."""
    return f"""    if (tid == 0) evt_bulk_wait_read1();     // the store that last read this buffer is done
    evt_named_bar(1 + wg, 128);
    const u32 stgb_s = stg_s + ({buf} & 1) * {nt * 8192};
{col_run_begin(program, 8)}"""


def group_body(program, fm, red_layout, staged):
    """Column group j (defined by the caller; jj = j % 8 within a staged panel): the epilogue on
    its pairs."""
    if not staged:
        return f"""    const int n = n0 + 8 * j + 2 * q;
{column_group_body(program, fm, red_layout)}"""
    return f"""      const int n = n0 + 8 * j + 2 * q;
{column_group_body(program, fm, red_layout, group="jj")}"""


def panel_close(program, spec, fm, red_layout, nt, row0, buf):
    """Staged outputs, after panel c's column groups: the column partials reduced across the
    warp, the panel made visible to the TMA and stored (one bulk group)."""
    store_fn = "\n      ".join(_store(program, spec, o, "n0 + 64 * c", row0,
                                     f"stg_s + (({buf} & 1) * {nt} + {o}) * 8192") for o in range(nt))
    return f"""{col_run_end(program, fm, red_layout, 8, "c * 8")}
    evt_fence_async_smem();                   // st.shared -> visible to the TMA (async proxy)
    evt_named_bar(1 + wg, 128);
    if (tid == 0) {{
      {store_fn}
      evt_bulk_commit();
    }}"""


def consumer_head(off, stg_bytes):
    """A cooperative consumer warpgroup's start: its registers, its thread's fragment
    coordinates, its shared-memory slices and the ring position (s, ph) it waits on next."""
    return f"""    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int wg = wgid - 1, w = tid >> 5, lane = tid & 31, gq = lane >> 2, q = lane & 3;
    const u32 stg_s = sbase + {off['staging']} + wg * {stg_bytes};          // this WG's output staging
    const u32 red_s = sbase + {off['red']} + wg * {4 * off['red_floats']};   // this WG's reduction buffers
    const u32 vs = sbase + {off['vec']} + wg * {off['vec_bytes']};          // this WG's tile vectors
    int s = 0; u32 ph = 0;"""


def generate(program, spec, cfg):
    """CUDA C++ source of the sm90a kernel `evt_main` plus evt_init/evt_finish."""
    if cfg.pingpong:
        return generate_pingpong(program, spec, cfg)
    if cfg.overlap:
        # (imported here: sm90_overlap builds on this module's pieces)
        from .sm90_overlap import generate_overlap
        return generate_overlap(program, spec, cfg)
    staged = spec.tma_out >= 0
    nt = len(tma_outputs(spec))
    fm = _fragment_map(cfg, spec, program)
    red_layout, _ = smem_floats(program, fm)
    off = smem_layout(program, spec, cfg)
    S, BN = cfg.stages, cfg.bn
    nacc = BN // 2
    stg_bytes = staging_bytes(cfg, nt)
    aux_wait, aux_release = _aux_consumer(spec, cfg, off)
    vec_pre, vec_stage = _tile_vectors(program, spec, cfg, off, "m0 + 64 * wg", 64, staged)
    b_loads, b_desc = _b_operand(spec, BN)
    a_load = _a_loads(spec, 128)
    epi_loop = _column_loop(program, spec, fm, red_layout, staged, nt, BN, row0="m0 + 64 * wg", buf="c")
    loop, k_first, k_limit = splitk.unit_loop(spec, BK, "    ")
    header = (f"// evt sm90a kernel: {spec.dtype}, tile {BM}x{BN}x{BK}, {S} stages, B "
              f"{'K-major' if spec.b_kmajor else 'N-major'}, TMA-stored outputs {tma_outputs(spec)}, "
              f"TMA-loaded inputs {spec.aux_tma}, fast_math {spec.fast_math}"
              + (f", split-K {spec.split_k}" if spec.split_k > 1 else "") + "\n")
    kernel = f"""{_kernel_head(spec, cfg, off, empty_arrivals=2)}
{_producer(program, spec, cfg, off, BM, a_load, b_loads)}
    // ---- consumer warpgroups: wgmma over the ring, then the fused epilogue ----
{consumer_head(off, stg_bytes)}
    int it = 0;                                          // index of the tile among this CTA's tiles
    {loop}
      int l, mt, nt;
      evt_tile_coords(a, t, {cfg.group_m}, l, mt, nt);
      const int m0 = mt * {BM}, n0 = nt * {BN};
{vec_pre}
      float d[{nacc}];
      int prev = -1;
      for (int k0 = {k_first}; k0 < {k_limit}; k0 += {BK}) {{
        evt_mbar_wait(bars + 8 * s, ph);
        const u32 sa = sbase + s * {off['stage']} + wg * 8192, sb = sbase + s * {off['stage']} + {off['b']};
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k)
          evt_wgmma(d, {_a_desc(spec, "sa")}, {b_desc}, (k0 > {k_first} || k > 0) ? 1 : 0);
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");   // the previous k-block is done
        if (prev >= 0 && tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
        prev = s;
        if (++s == {S}) {{ s = 0; ph ^= 1; }}
      }}
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      if (tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
      #pragma unroll
      for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");   // no reads before the wait
{splitk.fixup(spec, nacc)}      // ---- fused epilogue ----
{vec_stage}
{aux_wait}
{declare_partials(program, fm)}
{epi_loop}
{aux_release}
{combine(program, fm, red_layout)}
    }}
    if (tid == 0) evt_bulk_wait0();
  }}
}}
"""
    return module_source(program, spec, header, kernel)


def generate_pingpong(program, spec, cfg):
    """Ping-pong schedule (hopper-gemm-notes §12): the CTA's tiles go alternately to consumer
    WG1 and WG2; each owns a whole bm x bn tile (bm/64 m64nBN fragments, 128 fp32 registers).
    Two named barriers order the mainloops (WG1's tile i, WG2's tile i+1, WG1's tile i+2, ...),
    so one WG has the tensor cores to itself while the other runs its epilogue. The producer
    streams every tile's k-blocks through one ring in tile order; a consumer finds its k-block
    at ring position (local tile index) * KB + kb. Slots are released by the one WG reading them.
    """
    assert cfg.bm in (64, 128) and cfg.bn in (128, 256) and cfg.bm * cfg.bn <= 128 * 256 // 2
    assert spec.split_k == 1, "split-K runs on the cooperative schedule only"
    staged = spec.tma_out >= 0
    nt = len(tma_outputs(spec))
    fm = _pp_fragment_map(cfg, spec, program)
    red_layout, _ = smem_floats(program, fm)
    off = smem_layout(program, spec, cfg)
    aux_wait, aux_release = _aux_consumer(spec, cfg, off)
    # aux in the ring: waited on before the turn goes to the other WG (_aux_ring_consumer's invariant)
    ring_aux_wait, buffer_aux_wait = (aux_wait, "") if spec.aux_ring else ("", aux_wait)
    vec_pre, vec_stage = _tile_vectors(program, spec, cfg, off, "m0", cfg.bm, staged)
    S, BN, BMp = cfg.stages, cfg.bn, cfg.bm
    MH = BMp // 64                      # m-halves per tile (one m64nBN wgmma each per k16)
    half = BN // 2                      # fp32 accumulators per m-half per thread
    nacc = MH * half
    stg_bytes = staging_bytes(cfg, nt)
    b_loads, b_desc = _b_operand(spec, BN)
    a_load = _a_loads(spec, BMp)
    cols = _column_loop(program, spec, fm, red_layout, staged, nt, BN, row0="m0 + 64 * h", buf="g",
                        panel_index=f"h * {BN // 64} + c")
    epi_loop = f"""  #pragma unroll
  for (int h = 0; h < {MH}; ++h) {{             // one m64 fragment at a time
{declare_partials(program, fm)}
{cols}
{combine(program, fm, red_layout)}
  }}"""
    mma = "\n".join(
        f"          evt_wgmma(d + {h * half}, {_a_desc(spec, f'sa + {h * 8192}')}, {b_desc}, "
        f"(kb > 0 || k > 0) ? 1 : 0);" for h in range(MH))
    header = (f"// evt sm90a kernel (ping-pong): {spec.dtype}, tile {BMp}x{BN}x{BK} per consumer warpgroup, {S} "
              f"stages, B {'K-major' if spec.b_kmajor else 'N-major'}, TMA-stored outputs {tma_outputs(spec)}, "
              f"TMA-loaded inputs {spec.aux_tma}, fast_math {spec.fast_math}\n")
    kernel = f"""{_kernel_head(spec, cfg, off, empty_arrivals=1)}
  const int KB = (a.K + {BK - 1}) / {BK};
{_producer(program, spec, cfg, off, BMp, a_load, b_loads)}
    // ---- consumer warpgroups: alternate whole tiles; mainloops ordered, epilogues overlapped ----
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
    const int wg = wgid - 1, w = tid >> 5, lane = tid & 31, gq = lane >> 2, q = lane & 3;
    const u32 stg_s = sbase + {off['staging']} + wg * {stg_bytes};          // this WG's output staging
    const u32 red_s = sbase + {off['red']} + wg * {4 * off['red_floats']};   // this WG's reduction buffers
    const u32 vs = sbase + {off['vec']} + wg * {off['vec_bytes']};          // this WG's tile vectors
    const int my_turn = 3 + wg, next_turn = 4 - wg;      // named barriers 3 (WG1 may go), 4 (WG2 may go)
    int it = wg;                                         // index of the tile among this CTA's tiles
    for (int t = blockIdx.x + wg * gridDim.x; t < a.tiles; t += 2 * gridDim.x, it += 2) {{
      int l, mt, nt;
      evt_tile_coords(a, t, {cfg.group_m}, l, mt, nt);
      const int m0 = mt * {BMp}, n0 = nt * {BN};
{vec_pre}
      float d[{nacc}];
      if (it > 0) evt_named_bar(my_turn, 256);           // the other WG's previous mainloop is done
      u32 pos = (u32)it * (u32)(KB + {aux_stages(spec, cfg)});   // ring position of this tile's first k-block
      u32 s = pos % {S}, ph = (pos / {S}) & 1;
      u32 prev = 0;
      for (int kb = 0; kb < KB; ++kb) {{
        evt_mbar_wait(bars + 8 * s, ph);
        const u32 sa = sbase + s * {off['stage']}, sb = sa + {off['b']};
        asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
        #pragma unroll
        for (int k = 0; k < 4; ++k) {{
{mma}
        }}
        asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");   // the previous k-block is done
        if (kb > 0 && tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
        prev = s;
        if (++s == {S}) {{ s = 0; ph ^= 1; }}
      }}
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
      if (tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
{ring_aux_wait}
      if (t + gridDim.x < a.tiles) evt_named_bar_arrive(next_turn, 256);   // the other WG's next tile may start
      #pragma unroll
      for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");   // no reads before the wait
      // ---- fused epilogue (overlaps the other WG's mainloop) ----
{vec_stage}
{buffer_aux_wait}
{epi_loop}
{aux_release}
    }}
    if (tid == 0) evt_bulk_wait0();
  }}
}}
"""
    return module_source(program, spec, header, kernel)
