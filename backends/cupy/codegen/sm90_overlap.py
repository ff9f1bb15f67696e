"""The overlapped cooperative schedule of the sm_90a kernel (`TileConfig(..., overlap=True)`,
128 x 128 only): both consumer warpgroups share every tile, 64 rows each, as in the cooperative
schedule, but hold two accumulator sets (d: tile t's, dn: the CTA's next tile's), so tile t's
fused epilogue runs while the tensor cores work on the next tile.

Why: in the cooperative schedule the tensor cores idle through every epilogue, and ping-pong,
which overlaps them, gives one warpgroup a whole tile's epilogue (measured 25-50 % slower than
cooperative on W2 and W4, bench/RESULTS.md runs 84-85). The numba backend's
codegen/consumer_overlap.py is the same schedule; the piece and ring arithmetic is
backends/gpu/overlap.py's, shared by both.

A consumer warpgroup's tile loop, t' = t + gridDim.x the CTA's next tile:

    first tile: its k-loop into d alone, drained
    per tile t: wait for t's aux stages (ring order), step past them
                for c in 0 .. E-1:   issue k-block c of t' into dn     (if t' exists and c < KB)
                                     piece c of t's epilogue on d       (2 of its 16 column groups)
                                     retire k-block c - 1               (wait_group 1, its slot back)
                t''s remaining k-blocks; drain (wait_group 0, last slot back; on every path)
                d = dn

Ring positions: the producer is the cooperative one (t's k-blocks, t's aux stages, t''s
k-blocks, ...), and each warpgroup waits on every position in that order, so no parity wait
passes on an older phase. Ring invariant (gpu/overlap.py): with at most two ring inputs the
first piece reads every ring word the thread needs into registers and releases t's aux stages
before its first column group; with more, they are released after the last piece and
E <= stages - aux stages. Tile vectors (bias etc.) are stored to shared memory at piece 0, then
their registers load the next tile's (guarded: there may be none). The last tile's pieces run
with nothing beside them (no issue, the drain waits for nothing). Every mbarrier wait is the
watchdog's bounded one.
"""
from evt_core.errors import UnsupportedError

from ...gpu import overlap
from ...gpu.sm90 import BK, BM
from . import sm90
from .common import module_source
from .fragments import combine, declare_partials, smem_floats
from .plan import tma_outputs
from .sm90_io import (aux_ring_address, aux_ring_release, aux_ring_step, aux_ring_wait, aux_stages,
                      tile_vector_parts)


def refusal(program, spec, cfg):
    """None where the overlapped schedule can run this kernel kind with tile cfg, else why not
    (a forced tile then runs cooperative, and kernel.stages["fast_paths"] says why)."""
    if spec.mainloop != "sm90":
        return "the sm80 mainloop (mma.sync accumulates synchronously)"
    if cfg.pingpong:
        return "the ping-pong schedule (each warpgroup owns whole tiles there)"
    wide = overlap.width_refusal(cfg.bn)
    if wide:
        return wide
    if spec.split_k > 1:
        return f"split_k={spec.split_k} (only the last split of a tile runs its epilogue)"
    if spec.aux_tma and not spec.aux_ring:
        return ("(M, N) inputs in a buffer of their own (aux_ring=False: the next tile's loads "
                "would wait in the producer for this tile's epilogue)")
    return None


def require(program, spec, cfg):
    """Raise UnsupportedError naming why, where the overlapped schedule cannot run this kind."""
    why = refusal(program, spec, cfg)
    if why:
        raise UnsupportedError(f"tile {cfg.label()}: the overlapped schedule cannot run this kernel: {why}")


def ring_inputs(spec, cfg):
    """(M, N) inputs that travel through the ring after each tile's k-blocks."""
    return len(spec.aux_tma) if aux_stages(spec, cfg) else 0


def preloaded(spec, cfg):
    """Whether the first piece reads every ring word and releases the aux stages at once."""
    return overlap.preloaded(ring_inputs(spec, cfg), cfg.bn)


def pieces(spec, cfg):
    """How many of the next tile's k-blocks a tile's epilogue is spread over."""
    return overlap.pieces(ring_inputs(spec, cfg), cfg.bn, cfg.stages, aux_stages(spec, cfg))


def _kblock_functions(spec, cfg, off):
    """One k-block's issue, its retirement and a tile's drain as device functions (the kernel
    issues k-blocks at up to 2 + pieces sites; forceinline, so the code is as if written out)."""
    S, nacc = cfg.stages, cfg.bn // 2
    _, b_desc = sm90._b_operand(spec, cfg.bn)
    return f"""
// k-block kb's wgmma group on the accumulators acc: wait for ring slot s to fill, four k16 steps
// (scale-d 0 on the tile's first: acc comes in undefined), committed; it runs while the caller
// goes on
__device__ __forceinline__ void evt_kb_issue(float* acc, u32 sbase, u32 bars, int s, u32 ph, int wg, int kb) {{
  evt_mbar_wait(bars + 8 * s, ph);
  const u32 sa = sbase + s * {off['stage']} + wg * 8192, sb = sbase + s * {off['stage']} + {off['b']};
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  #pragma unroll
  for (int k = 0; k < 4; ++k)
    evt_wgmma(acc, {sm90._a_desc(spec, "sa")}, {b_desc}, (kb > 0 || k > 0) ? 1 : 0);
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}}
// after the next k-block's issue: the previous group is done (one group stays in flight), so
// its slot goes back; s and ph step on
__device__ __forceinline__ void evt_kb_retire(u32 bars, int& s, u32& ph, int& prev, int tid) {{
  asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  if (prev >= 0 && tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
  prev = s;
  if (++s == {S}) {{ s = 0; ph ^= 1; }}
}}
// after a tile's last k-block: every group done, the last slot back (none where none was issued)
__device__ __forceinline__ void evt_kb_drain(float* acc, u32 bars, int prev, int tid) {{
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  if (prev >= 0 && tid == 0) evt_mbar_arrive(bars + 8 * ({S} + prev));
  #pragma unroll
  for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");   // no reads before the wait
}}"""


_ISSUE = "evt_kb_issue({acc}, sbase, bars, s, ph, wg, kb);"
_RETIRE = "evt_kb_retire(bars, s, ph, prev, tid);"
_DRAIN = "evt_kb_drain({acc}, bars, prev, tid);"


def _preload(spec, cfg):
    """Piece 0 with the ring inputs read whole: every 32-bit word of the thread's rows (2 a
    column group) of every input into xw[x][j][slot] (32 registers an input), then the
    warpgroup's barrier and the release of the tile's aux stages."""
    X, groups = len(spec.aux_tma), cfg.bn // 8
    panel = aux_ring_address(spec, cfg, f"wg * {cfg.bn // 64} + (j >> 3)")
    word = sm90._PANEL_WORD.format(c="j")
    reads = "\n".join(f"          xw[{x}][j][s] = evt_lds_u32({panel} + {word} + {x * 8192});" for x in range(X))
    return f"""      // every ring word of this thread's rows, read now so the tile's aux stages go back at once
      // (the next tile's k-blocks fill the ring behind them; s below is the fragment row slot)
      #pragma unroll
      for (int j = 0; j < {groups}; ++j) {{
        #pragma unroll
        for (int s = 0; s < 2; ++s) {{
{reads}
        }}
      }}
{aux_ring_release(spec, cfg)}"""


def _pieces_text(program, spec, cfg, fm, red_layout, n, early, next_vectors):
    """Tile t's epilogue in n pieces, each between the issue of one of the next tile's k-blocks
    and its retirement. Column group j goes to piece overlap.piece_of_group(j, 16, n); a staged
    panel's scope opens before its first group and closes (stores) after its last, in whatever
    piece that falls. The last piece ends with the reductions' combines."""
    staged = spec.tma_out >= 0
    nt = len(tma_outputs(spec))
    groups = cfg.bn // 8
    by_piece = [[] for _ in range(n)]
    for j in range(groups):
        by_piece[overlap.piece_of_group(j, groups, n)].append(j)
    out = []
    for p, js in enumerate(by_piece):
        out += [f"      // -- piece {p}: k-block kb of the next tile runs beside it --",
                "      go = more && kb < KB;",
                "      if (go) " + _ISSUE.format(acc="dn")]
        if p == 0 and early:
            out.append(_preload(spec, cfg))
        for j in js:
            c, jj = divmod(j, 8)
            if staged and jj == 0:
                out += [f"      {{ const int c = {c};        // 64 x 64 panel c, staging double-buffered",
                        sm90.panel_open(program, nt, "c")]
            head = f"const int jj = {jj}, j = {j};" if staged else f"const int j = {j};"
            out += [f"      {{ {head}", sm90.group_body(program, fm, red_layout, staged), "      }"]
            if staged and jj == 7:
                out += [sm90.panel_close(program, spec, fm, red_layout, nt, "m0 + 64 * wg", "c"), "      }"]
        if p == n - 1:
            out.append(combine(program, fm, red_layout))
        out += ["      if (go) { " + _RETIRE + " ++kb; }"]
        if p == 0 and next_vectors:
            out.append(next_vectors)
    return "\n".join(x for x in out if x)


def generate_overlap(program, spec, cfg):
    """CUDA C++ source of the overlapped sm90a kernel `evt_main` plus evt_init/evt_finish.
    Raises UnsupportedError (naming the reason) for a kind the schedule cannot run (refusal)."""
    require(program, spec, cfg)
    staged = spec.tma_out >= 0
    nt = len(tma_outputs(spec))
    S, BN = cfg.stages, cfg.bn
    nacc = BN // 2
    n, early = pieces(spec, cfg), preloaded(spec, cfg)
    assert overlap.ring_admits(n, S, aux_stages(spec, cfg), early), (n, S, aux_stages(spec, cfg))
    words = (lambda x: f"xw[{x}][j][s]") if early else None
    fm = sm90._fragment_map(cfg, spec, program, aux_words=words)
    red_layout, _ = smem_floats(program, fm)
    off = sm90.smem_layout(program, spec, cfg)
    b_loads, _ = sm90._b_operand(spec, BN)
    decls, loads, vec_stage = tile_vector_parts(program, spec, cfg, off, "m0 + 64 * wg", 64, staged)
    first_loads = "\n".join(loads)
    next_loads = ""
    if loads:     # the next tile's vectors, in the registers piece 0 has just stored to shared memory
        next_loads = (f"      if (more) {{   // the next tile's vectors: loads fly under the rest of the epilogue\n"
                      f"        const int l = ln, m0 = mtn * {BM}, n0 = ntn * {BN};\n"
                      + "\n".join(loads) + "\n      }")
    ring = aux_stages(spec, cfg)
    aux_top = (aux_ring_wait(spec, cfg) + "\n" + aux_ring_step(spec, cfg)) if ring else ""
    aux_after = aux_ring_release(spec, cfg) if ring and not early else ""
    xw = f"      u32 xw[{len(spec.aux_tma)}][{BN // 8}][2];      // the tile's ring words (piece 0 reads them)" \
        if early else ""
    header = (f"// evt sm90a kernel (overlapped cooperative): {spec.dtype}, tile {BM}x{BN}x{BK}, {S} stages, "
              f"{n} epilogue pieces, B {'K-major' if spec.b_kmajor else 'N-major'}, TMA-stored outputs "
              f"{tma_outputs(spec)}, TMA-loaded inputs {spec.aux_tma}"
              f"{' (read whole by the first piece)' if early else ''}, fast_math {spec.fast_math}\n")
    pieces_text = _pieces_text(program, spec, cfg, fm, red_layout, n, early, next_loads)
    kernel = f"""{sm90._kernel_head(spec, cfg, off, empty_arrivals=2, helpers=_kblock_functions(spec, cfg, off))}
{sm90._producer(program, spec, cfg, off, BM, sm90._a_loads(spec, 128), b_loads)}
    // ---- consumer warpgroups: cooperative, two accumulator sets; a tile's epilogue in {n} pieces ----
{sm90.consumer_head(off, sm90.staging_bytes(cfg, nt))}
    const int KB = (a.K + {BK - 1}) / {BK};                 // k-blocks per tile
    float d[{nacc}], dn[{nacc}];                              // tile t's accumulators, the next tile's
    int prev = -1, kb = 0;
    bool go;                                              // a k-block of the next tile beside this piece
    int t = blockIdx.x, l = 0, mt = 0, nt = 0;            // tile t and its coordinates
{chr(10).join(decls)}
    if (t < a.tiles) {{                                   // the CTA's first tile: its mainloop alone
      evt_tile_coords(a, t, {cfg.group_m}, l, mt, nt);
      const int m0 = mt * {BM}, n0 = nt * {BN};
{first_loads}
      for (kb = 0; kb < KB; ++kb) {{
        {_ISSUE.format(acc="d")}
        {_RETIRE}
      }}
      {_DRAIN.format(acc="d")}
    }}
    for (; t < a.tiles; t += gridDim.x) {{
      const int m0 = mt * {BM}, n0 = nt * {BN};
      const int tn = t + (int)gridDim.x;                  // the CTA's next tile
      const bool more = tn < a.tiles;                     // (uniform over the CTA)
      int ln = 0, mtn = 0, ntn = 0;
      if (more) evt_tile_coords(a, tn, {cfg.group_m}, ln, mtn, ntn);
{aux_top}
      // ---- tile t's fused epilogue, piece by piece beside the next tile's k-blocks ----
{vec_stage}
{declare_partials(program, fm)}
{xw}
      prev = -1;
      kb = 0;
{pieces_text}
{aux_after}
      if (more) {{
        for (; kb < KB; ++kb) {{
          {_ISSUE.format(acc="dn")}
          {_RETIRE}
        }}
      }}
      // on every path: ptxas cannot tell that `more` is uniform, and a wait it inserted in a
      // branch would serialise every wgmma
      {_DRAIN.format(acc="dn")}
      #pragma unroll
      for (int i = 0; i < {nacc}; ++i) d[i] = dn[i];
      l = ln; mt = mtn; nt = ntn;
    }}
    if (tid == 0) evt_bulk_wait0();
  }}
}}
"""
    return module_source(program, spec, header, kernel, aux_words=early)
