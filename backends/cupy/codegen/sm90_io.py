"""The sm_90a kernels' epilogue data movement, beside the mainloop in sm90.py: TMA loads of
(M, N) aux inputs issued by the producer (aux_tma), broadcast vectors staged once per tile in
shared memory, and TMA stores of the staged 16-bit outputs. Each function returns CUDA source
for one place in the kernel; sm90.generate and generate_pingpong splice them in."""
from ...gpu import sm90
from .epilogue import _offset
from .plan import VEC_ROW, tile_vectors, tma_outputs
from .prelude import STORAGE


def aux_geometry(spec, cfg):
    """aux_tma: (buffers, m-halves per buffer, 64-column panels, bytes per buffer, bytes per input)."""
    nb = 2 if cfg.pingpong else 1          # ping-pong: one buffer per consumer WG (two tiles live)
    mh = cfg.bm // 64 if cfg.pingpong else 2
    panels = cfg.bn // 64
    per_input = mh * panels * 8192
    return nb, mh, panels, per_input * len(spec.aux_tma), per_input


def ring_stage_bytes(cfg):
    """Bytes of one mainloop ring stage: the A rows (a ping-pong tile's, or the cooperative CTA's
    128) and the B columns, BK = 64 deep, 16-bit: a multiple of one 8 KB 64 x 64 panel."""
    return ((cfg.bm if cfg.pingpong else 128) + cfg.bn) * cfg.bk * 2


def aux_ring_geometry(spec, cfg):
    """aux_tma through the ring (Spec.aux_ring): backends/gpu/sm90.aux_ring_geometry for this
    tile (a ping-pong warpgroup's bm rows, or the cooperative CTA's 128)."""
    rows = cfg.bm if cfg.pingpong else 128
    return sm90.aux_ring_geometry(len(spec.aux_tma), rows, cfg.bn, ring_stage_bytes(cfg))


def aux_stages(spec, cfg):
    """Ring stages one tile's aux inputs occupy after its k-blocks (0 without aux_ring)."""
    if not (spec.aux_tma and spec.aux_ring):
        return 0
    return aux_ring_geometry(spec, cfg)[2]


def ring_holds_aux(spec, cfg):
    return sm90.ring_holds_aux(aux_stages(spec, cfg), cfg.stages)


def aux_ring_address(spec, cfg, group):
    """Shared-space address of input 0's panel of aux group `group` (a C expression; input x's
    panel is 8 KB * x after it), in the ring stages that follow the tile's k-blocks from slot
    `s_aux` on."""
    _, per_stage, _ = aux_ring_geometry(spec, cfg)
    g = f"({group})"
    return (f"(sbase + (u32)((s_aux + {g} / {per_stage}) % {cfg.stages}) * {ring_stage_bytes(cfg)}u"
            f" + (u32)({g} % {per_stage}) * {8192 * len(spec.aux_tma)}u)")


def _aux_ring_producer(program, spec, cfg, m0):
    """aux_ring, producer thread, after a tile's last k-block: the tile's aux groups go into the
    next ring positions like k-blocks (wait empty, expect the full boxes' bytes, TMA loads), so
    they need no buffer of their own and arrive as the consumers finish the mainloop."""
    if not aux_stages(spec, cfg):
        return ""
    groups, per_stage, stages = aux_ring_geometry(spec, cfg)
    panels = cfg.bn // 64
    lines = ["        // aux_ring: this tile's M x N inputs, as the ring positions after its k-blocks"]
    for a in range(stages):
        gs = range(a * per_stage, min(groups, (a + 1) * per_stage))
        lines += [f"        evt_mbar_wait(bars + 8 * ({cfg.stages} + s), ph ^ 1);",
                  f"        evt_mbar_expect_tx(bars + 8 * s, {len(gs) * len(spec.aux_tma) * 8192});"]
        for i, g in enumerate(gs):
            h, c = divmod(g, panels)
            for x, k in enumerate(spec.aux_tma):
                batched = program.batched and program.spans(program.inputs[k])[0]
                dst = f"sbase + s * {ring_stage_bytes(cfg)} + {(i * len(spec.aux_tma) + x) * 8192}"
                lines.append("        " + _tma_load(f"tmX{x}", batched, dst, f"n0 + {64 * c}", f"{m0} + {64 * h}",
                                                    "bars + 8 * s"))
        lines.append(f"        if (++s == {cfg.stages}) {{ s = 0; ph ^= 1; }}")
    return "\n" + "\n".join(lines)


def _aux_ring_consumer(spec, cfg):
    """aux_ring, consumer side: (wait for the tile's aux stages, which follow its k-blocks at
    ring slot s / parity ph; after the epilogue, release them once the warpgroup is done and
    step s / ph past them).

    Invariant: a consumer waits on ring position q only once every earlier position has
    completed. mbarrier waits test a phase's parity, so a wait on q while q - S is still
    incomplete passes on the older phase (then releases the slot early, and the producer
    overwrites data still being read). The cooperative warpgroups wait on every position in
    order. In ping-pong the other warpgroup starts its mainloop at the turn barrier, past this
    tile's aux positions, which it never waits on; so generate_pingpong puts this wait before
    the turn is handed over."""
    if not aux_stages(spec, cfg):
        return "", ""
    return aux_ring_wait(spec, cfg), aux_ring_release(spec, cfg) + "\n" + aux_ring_step(spec, cfg)


def aux_ring_wait(spec, cfg):
    """aux_ring, consumer: wait for the tile's aux stages, in ring order from slot s (parity ph),
    remembering the first slot as s_aux (the epilogue's panel addresses start there)."""
    stages, S = aux_stages(spec, cfg), cfg.stages
    return (f"      const int s_aux = s;                         // aux_ring: the tile's aux groups from slot s on\n"
            f"      #pragma unroll\n"
            f"      for (int i = 0; i < {stages}; ++i) {{\n"
            f"        const int sa = s_aux + i;\n"
            f"        evt_mbar_wait(bars + 8 * (sa % {S}), ph ^ (u32)(sa >= {S}));\n"
            f"      }}")


def aux_ring_release(spec, cfg):
    """aux_ring, consumer: once every thread of the warpgroup has read the tile's aux panels (the
    barrier), thread 0 gives the aux stages from slot s_aux on back to the producer."""
    stages, S = aux_stages(spec, cfg), cfg.stages
    return (f"      evt_named_bar(1 + wg, 128);                 // aux_ring: the warpgroup's last read is done\n"
            f"      if (tid == 0) {{\n"
            f"        #pragma unroll\n"
            f"        for (int i = 0; i < {stages}; ++i) evt_mbar_arrive(bars + 8 * ({S} + (s_aux + i) % {S}));\n"
            f"      }}")


def aux_ring_step(spec, cfg):
    """aux_ring, consumer: the ring position (s, ph) steps past the tile's aux stages (at most
    S - 1 of them, ring_holds_aux: one wrap at most)."""
    stages, S = aux_stages(spec, cfg), cfg.stages
    return f"      s += {stages}; if (s >= {S}) {{ s -= {S}; ph ^= 1; }}"


def _tma_load(which, batched, dst, x, y, bar):
    if batched:
        return f"evt_tma_load_3d({dst}, &{which}, {x}, {y}, l, {bar});"
    return f"evt_tma_load_2d({dst}, &{which}, {x}, {y}, {bar});"


def _store(program, spec, o, x, y, src):
    """TMA store of staged output slot o's 64 x 64 panel at column x, row y."""
    k = tma_outputs(spec)[o]
    tm = "tmD" if o == 0 else f"tmD{o}"
    if program.batched and program.spans(program.outputs[k])[0]:
        return f"evt_tma_store_3d(&{tm}, {x}, {y}, l, {src});"
    return f"evt_tma_store_2d(&{tm}, {x}, {y}, {src});"


def _aux_init(spec, cfg):
    if not spec.aux_tma or spec.aux_ring:
        return ""
    nb = aux_geometry(spec, cfg)[0]
    readers = 128 if cfg.pingpong else 256
    return (f"\n    for (int b = 0; b < {nb}; ++b) {{ evt_mbar_init(abars + 8 * b, 1); "
            f"evt_mbar_init(abars + 8 * ({nb} + b), {readers}); }}   // aux_tma: full[b], empty[b]")


def _aux_producer(program, spec, cfg, off):
    """aux_tma, producer thread, inside the k-block loop: once the tile's first min(KB, S) k-blocks
    are queued (the mainloop is about to start, so the previous tile of this buffer is being or has
    been consumed), wait until the consumers released the buffer and TMA-load the tile's M x N
    inputs as 64 x 64 128B-swizzled panels: input x, m-half h, panel c at ((x*MH + h)*P + c)*8 KB."""
    if not spec.aux_tma or spec.aux_ring:
        return ""
    nb, mh, panels, buf, per = aux_geometry(spec, cfg)
    ab = "(u32)(it & 1)" if cfg.pingpong else "0u"
    aph = "(u32)((it >> 1) & 1)" if cfg.pingpong else "(u32)(it & 1)"
    loads = []
    for x, k in enumerate(spec.aux_tma):
        batched = program.batched and program.spans(program.inputs[k])[0]
        ld = _tma_load(f"tmX{x}", batched, f"xb + {x * per} + (h * {panels} + c) * 8192", "n0 + 64 * c",
                       "m0 + 64 * h", "afb")
        loads.append(f"            for (int h = 0; h < {mh}; ++h) for (int c = 0; c < {panels}; ++c) {ld}")
    loads = "\n".join(loads)
    return f"""
          if (kb == auxkb) {{      // aux_tma: this tile's M x N inputs
            const u32 ab = {ab}, aph = {aph};
            evt_mbar_wait(abars + 8 * ({nb} + ab), aph ^ 1);    // the consumers are done with buffer ab
            const u32 afb = abars + 8 * ab;
            evt_mbar_expect_tx(afb, {buf});                    // full boxes, zero-filled past the edges
            const u32 xb = sbase + {off['aux']} + ab * {buf};
{loads}
          }}"""


def _aux_consumer(spec, cfg, off):
    """aux_tma, consumer side: (wait before the epilogue, release after it)."""
    if spec.aux_ring:
        return _aux_ring_consumer(spec, cfg)
    if not spec.aux_tma:
        return "", ""
    nb, mh, panels, buf, per = aux_geometry(spec, cfg)
    if cfg.pingpong:
        ab, aph, base = "(u32)(it & 1)", "(u32)((it >> 1) & 1)", f"sbase + {off['aux']} + ab * {buf}"
    else:
        ab, aph, base = "0u", "(u32)(it & 1)", f"sbase + {off['aux']} + wg * {panels * 8192}"
    wait = (f"      const u32 ab = {ab}, aph = {aph};\n"
            f"      evt_mbar_wait(abars + 8 * ab, aph);            // aux_tma: this tile's inputs are in shared memory\n"
            f"      const u32 auxw = {base};                       // shared-space address of buffer ab")
    release = f"      evt_mbar_arrive(abars + 8 * ({nb} + ab));         // aux_tma: every thread is done reading buffer ab"
    return wait, release


def _tile_vectors(program, spec, cfg, off, m0w, rows, staged):
    """Broadcast vectors (plan.tile_vectors), consumer side: (code at the tile's start, which
    loads this thread's share of every vector into registers so the loads fly during the
    mainloop; code after the mainloop, which stores them into the warpgroup's buffer `vs`).
    Thread tid holds elements tid, tid + 128, ...; zero past the problem's edges. Ordering:
    with staged outputs, the epilogue's first named barrier publishes the stores and the
    barrier after the previous tile's last panel made the buffer free; otherwise two named
    barriers do both."""
    decls, loads, stage = tile_vector_parts(program, spec, cfg, off, m0w, rows, staged)
    if not decls:
        return "", ""
    pre = ["      // tile vectors: issued now, consumed after the mainloop"]
    pre += [f"{d}\n{ld}" for d, ld in zip(decls, loads)]
    return "\n".join(pre), stage


def tile_vector_parts(program, spec, cfg, off, m0w, rows, staged):
    """_tile_vectors in parts: (each vector's register declaration, each vector's loads, the
    code storing them into `vs`), so a schedule that loads a tile's vectors a tile ahead can
    declare the registers once and load them where it likes."""
    tv = tile_vectors(program, spec)
    if not tv:
        return [], [], ""
    decls, pre, st = [], [], []
    for k, (kind, boff) in tv.items():
        op = program.inputs[k]
        ty = STORAGE[op.dtype]
        n_el = cfg.bn if kind == VEC_ROW else rows
        per = (n_el + 127) // 128
        spans = program.spans(op)
        if kind == VEC_ROW:
            idx, ok = "const int n = n0 + c;", f"c < {n_el} && n < a.N"
            ptr = f"a.in{k} + ({_offset(f'in{k}', spans)}) + (long long)n * a.in{k}_sN"
        else:
            idx, ok = f"const int m = {m0w} + c;", f"c < {n_el} && m < a.M"
            ptr = f"a.in{k} + ({_offset(f'in{k}', spans)})"
        decls.append(f"      {ty} tv{k}[{per}];")
        pre.append(f"      #pragma unroll\n"
                   f"      for (int i = 0; i < {per}; ++i) {{ const int c = tid + 128 * i; {idx} "
                   f"tv{k}[i] = ({ok}) ? __ldg({ptr}) : ({ty})0; }}")
        sts = "evt_sts_f32" if ty == "float" else "evt_sts_u16"
        item = 4 if ty == "float" else 2
        st.append(f"      #pragma unroll\n      for (int i = 0; i < {per}; ++i) {{ const int c = tid + 128 * i; "
                  f"if (c < {n_el}) {sts}(vs + {boff} + {item} * c, tv{k}[i]); }}")
    bar = "      evt_named_bar(1 + wg, 128);"
    stage = "\n".join(st) if staged else "\n".join([bar + "   // the previous tile's epilogue is done with vs"] + st + [bar])
    return decls, pre, stage
