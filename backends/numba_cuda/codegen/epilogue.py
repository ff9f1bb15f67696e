"""Generated source for the fused epilogue: the Program evaluated per accumulator element, with
its stores and the reductions (registers -> CTA through shared memory -> one global combine per
CTA and output element).

Both mainloops hand the epilogue the same thread layout: thread (ty, tx) of a TY x TX grid owns
the elements (row0 + ty + i*TY, col0 + tx + j*TX) for i < RM, j < RN, so consecutive tx touch
consecutive columns (coalesced aux loads and stores for N-contiguous tensors). The tensor-core
kernel stages its fragments through shared memory chunk by chunk to get this layout; the SIMT
kernel already holds it in registers.

Reductions are classified by which tile axes they remove (`kind`):
  all  - over M and N: one partial per thread, combined across the CTA;
  col  - over M only:  one partial per owned column, combined across ty;
  row  - over N only:  one partial per owned row, combined across tx by warp shuffles;
  elem - over L only:  every element is its own output, combined straight into global memory.
AMIN is carried as AMAX of the negated value everywhere (workspace included) so only two combine
operators exist; the finishing kernel negates back. Every CTA-level combine runs in a fixed
order, so with `deterministic=True` (one workspace slot per CTA, no atomics) results are
bit-identical run to run.
"""
from dataclasses import dataclass

from evt_core.tree.ops import Op

from ...gpu.reductions import reduction_kind
from .spelling import spell

_LOADERS = {"float32": "ld_f32", "float16": "ld_f16", "bfloat16": "ld_bf16"}
_STORERS = {"float32": "st_f32", "float16": "st_f16", "bfloat16": "st_bf16"}


def tree_lines(program, accum_src, sfx, store, reduce, fast=()):
    """One element's code, one line per IR instruction; its values are named v<idx><sfx>.
    LOAD values must already be bound (each writer issues its loads ahead, for the whole row or
    fragment); store(idx, ins, src) and reduce(idx, ins, src) give the lines of a STORE and of a
    reduction's contribution, which is where the epilogue writers differ. `fast`: indices of the
    instructions spelled with MUFU approximations (backends/gpu/fastmath.py)."""
    lines = []
    for idx, ins in enumerate(program.instrs):
        v = f"v{idx}{sfx}"
        a = [f"v{x}{sfx}" for x in ins.args]
        if ins.op is Op.ACCUM:
            lines.append(f"{v} = {accum_src}    # %{idx} = accum")
        elif ins.op is Op.LOAD:
            pass
        elif ins.op is Op.SCALAR:
            lines.append(f"{v} = sc{ins.arg}    # %{idx} = scalar {program.scalars[ins.arg]}")
        elif ins.op is Op.CONST:
            lines.append(f"{v} = float32({float(ins.arg)!r})    # %{idx} = const")
        elif ins.op is Op.STORE:
            lines += store(idx, ins, a[0])
        elif ins.op in (Op.SUM, Op.MEAN, Op.AMAX, Op.AMIN):
            lines += reduce(idx, ins, a[0])
        else:
            lines.append(f"{v} = {spell(ins.op, a, idx in fast)}    # %{idx} = {ins.op.value}")
    return lines


def global_combine(red, det, k, value, m, n):
    """One combine of `value` into reduction k's fp32 workspace at (l, m, n) kept coords; a
    reduced axis is slot 0 (atomic) or the tile's own slot tile_m / tile_n (deterministic)."""
    lw = "l" if ("L" not in red.over or det) else "0"
    mw = m if "M" not in red.over else ("tile_m" if det else "0")
    nw = n if "N" not in red.over else ("tile_n" if det else "0")
    at = f"({lw} * ws{k}_wm + {mw}) * ws{k}_wn + {nw}"
    if det:
        return f"st_f32(ws{k}, {at}, {value})"
    return f"{'red_add' if red.op in (Op.SUM, Op.MEAN) else 'red_max'}(ws{k}, {at}, {value})"


def combine(red, a, b):
    """Source of the fp32 combine of two partials of `red`."""
    return f"({a} + {b})" if red.op in (Op.SUM, Op.MEAN) else f"nan_max({a}, {b})"


def identity(red):
    return "ZERO" if red.op in (Op.SUM, Op.MEAN) else "NEG_INF"


def _can_park(lay, n_row_reductions):
    """Row partials can be parked in the staging rows when the values come from staging (a
    run-time row loop), a row is one warp (TX == 32), the RM rows of a warp split its lanes
    evenly into power-of-two groups, and every row reduction has a TX-column slot to park in."""
    return (not lay.rows_unrolled and lay.TX == 32 and lay.RM & (lay.RM - 1) == 0 and lay.RM <= 32
            and 0 < n_row_reductions * lay.TX <= lay.cols)


@dataclass(frozen=True)
class Layout:
    """The epilogue's thread layout (see module docstring). `rows_unrolled`: emit the i loop
    unrolled (values live in registers indexed by constants) or as a run-time loop of one row
    per trip (values come from shared memory; more rows per trip made W4 spill on mma.sync and
    tripled numba's build time on sm_90a)."""
    TY: int
    TX: int
    RM: int
    RN: int
    rows_unrolled: bool

    @property
    def threads(self):
        return self.TY * self.TX

    @property
    def rows(self):
        return self.TY * self.RM

    @property
    def cols(self):
        return self.TX * self.RN


class EpilogueWriter:
    """Emits epilogue source lines for one Program. `value(i, j)` gives the source of the fp32
    accumulator of element (i, j); i is a literal or the loop variable `i`."""

    def __init__(self, program, layout, deterministic, barrier="cuda.syncthreads()", row_park=None,
                 staged_inputs=None):
        # `barrier`: the statement that synchronises the threads sharing the scratch buffer (the
        # CTA, or one consumer warpgroup of the sm_90 kernel through a named barrier); `tid`
        # in the emitted code is the thread's index among them.
        self.p, self.lay, self.det, self.barrier = program, layout, deterministic, barrier
        self.kinds = [reduction_kind(r) for r in program.reductions]
        # row_park = (staging base, pitch): row partials are parked in the staged rows and
        # combined after the chunk (_parked_row_combine) instead of by a shuffle chain and a
        # global combine per row inside the row loop; kept only where _can_park holds.
        if row_park and not _can_park(layout, len(self._row_reductions())):
            row_park = None
        self.row_park = row_park
        # staged_inputs = {input index: (shared base, pitch, loader)}: inputs the kernel has
        # already copied into shared memory as the tile's rows (row i of the chunk at i * pitch);
        # they are read from there instead of loaded per row.
        self.staged = staged_inputs or {}
        # Shared scratch (fp32 elements), used by col/all reductions after the loop. Row
        # reductions need none: the TX lanes that own a row are one aligned group of a warp, so
        # they combine with xor shuffles (a fixed butterfly order: deterministic).
        assert layout.TX & (layout.TX - 1) == 0 and layout.TX <= 32, layout
        lay = layout
        self.shared_offset = 0
        self.scratch_size = max(1, max(lay.TY * lay.cols, lay.threads + 32))

    # ---- per thread, before the element loops ----------------------------------------------

    def prologue(self):
        lines = ["# per-tensor batch offsets and reduction partials (registers)"]
        for k, op in enumerate(self.p.inputs):
            lines.append(f"in{k}_lo = l * in{k}_sl    # {op.name}")
        for k, op in enumerate(self.p.outputs):
            lines.append(f"out{k}_lo = l * out{k}_sl    # {op.name}")
        for k, (red, kind) in enumerate(zip(self.p.reductions, self.kinds)):
            if kind == "all":
                lines.append(f"p{k} = {identity(red)}    # {red.name}: {red.op.value} over {''.join(sorted(red.over))}")
            elif kind == "col":
                lines += [f"p{k}_{j} = {identity(red)}    # {red.name}, column j={j}" for j in range(self.lay.RN)]
        return lines

    # ---- the element loops of one chunk ----------------------------------------------------

    def chunk(self, value, row0="m0"):
        """Lines evaluating every element of the rows [row0, row0 + layout.rows), a group of rows
        at a time (all RM rows when unrolled, else one row per loop trip). Every aux LOAD
        of a group is issued before any of its elements' math and stores: the compiler may not
        move a load above a store through another raw pointer, so loads placed inside each
        element would each pay a full global-memory latency in turn. Column terms (the column,
        its bound check, its offset in every tensor) are computed once per chunk, row terms once
        per row, so an element's address is one add."""
        lay = self.lay
        self._chunks = getattr(self, "_chunks", 0) + 1
        ch = self._chunks
        loads = [(idx, ins) for idx, ins in enumerate(self.p.instrs) if ins.op is Op.LOAD]
        # An input that does not span M is the same for every row: loaded once per chunk.
        bcast = [(idx, ins) for idx, ins in loads if not self.p.spans(self.p.inputs[ins.arg])[1]]
        staged = [(idx, ins) for idx, ins in loads if ins.arg in self.staged and (idx, ins) not in bcast]
        rowwise = [x for x in loads if x not in bcast and x not in staged]
        # A run-time row loop loads its rows' inputs one trip ahead, so a trip's math and
        # stores hide the next trip's global-memory latency.
        prefetch = bool(rowwise) and not lay.rows_unrolled
        out = self._column_terms(ch, bcast)
        if prefetch:
            out += [f"m_pf{ch} = {row0} + ty", f"okm_pf{ch} = m_pf{ch} < M"]
            out += [f"v{idx}_pf{ch}_{j} = " + self._load(idx, ins, f"in{ins.arg}_lo + m_pf{ch} * in{ins.arg}_sm + "
                                                        f"in{ins.arg}_c{ch}_{j}", f"okm_pf{ch} & okn_{ch}_{j}")
                    for j in range(lay.RN) for idx, ins in rowwise]
        if lay.rows_unrolled:
            ind, group = "", [str(i) for i in range(lay.RM)]
        else:
            out.append(f"for i in range({lay.RM}):")
            ind, group = "    ", ["i"]
        # Unique names per element instance: numba's SSA passes are slow on reassignment.
        names = [f"{ch}_{r}" for r in range(len(group))]
        for iv, c in zip(group, names):
            out += [ind + x for x in self._row_terms(ch, c, iv, row0, bcast, rowwise, prefetch)]
            out += [ind + x for x in self._staged_values(c, iv, staged)]
        for iv, c in zip(group, names):
            out += [ind + x for x in self._row_elements(ch, c, iv, value)]
        if self.row_park:
            out += self._parked_row_combine(row0)
        return out

    def _tensors(self):
        return [f"in{k}" for k in range(len(self.p.inputs))] + [f"out{k}" for k in range(len(self.p.outputs))]

    def _load(self, idx, ins, offset, ok):
        t = self.p.inputs[ins.arg]
        return f"{_LOADERS[t.dtype]}(in{ins.arg}_p, {offset}) if {ok} else ZERO    # %{idx} = load {t.name}"

    def _column_terms(self, ch, bcast):
        """Per chunk and owned column j: the column, its bound check, its offset in every tensor
        and the row-broadcast inputs' values."""
        out = []
        for j in range(self.lay.RN):
            n = f"n_{ch}_{j}"
            out += [f"{n} = n0 + tx + {j * self.lay.TX}", f"okn_{ch}_{j} = {n} < N"]
            out += [f"{t}_c{ch}_{j} = {n} * {t}_sn" for t in self._tensors()]
            out += [f"v{idx}_b{ch}_{j} = " + self._load(idx, ins, f"in{ins.arg}_lo + in{ins.arg}_c{ch}_{j}",
                                                       f"okn_{ch}_{j}")
                    for idx, ins in bcast]
        return out

    def _row_terms(self, ch, c, iv, row0, bcast, rowwise, prefetch):
        """Per row (instance c, loop index iv): its bound check, its offset in every tensor, its
        row partials and its input values (or, prefetching, the next trip's loads)."""
        lay, m = self.lay, f"m_{c}"
        out = [f"{m} = {row0} + ty + {iv} * {lay.TY}", f"okm_{c} = {m} < M"]
        out += [f"{t}_r{c} = {t}_lo + {m} * {t}_sm" for t in self._tensors()]
        for k, kind in enumerate(self.kinds):
            if kind == "row":
                out.append(f"q{k}_{c} = {identity(self.p.reductions[k])}    # row partial of {self.p.reductions[k].name}")
        if prefetch:
            out += [f"v{idx}_{c}_{j} = v{idx}_pf{ch}_{j}    # loaded a trip ahead"
                    for j in range(lay.RN) for idx, _ in rowwise]
            out += [f"m_pf{ch} = {m} + {lay.TY}    # the next trip's row",
                    f"okm_pf{ch} = (m_pf{ch} < M) & (i + 1 < {lay.RM})"]
        for j in range(lay.RN):
            sfx = f"_{c}_{j}"
            out.append(f"ok{sfx} = okm_{c} & okn_{ch}_{j}")
            out += [f"v{idx}{sfx} = v{idx}_b{ch}_{j}" for idx, _ in bcast]
            for idx, ins in ([] if prefetch else rowwise):
                out.append(f"v{idx}{sfx} = " + self._load(idx, ins, f"in{ins.arg}_r{c} + in{ins.arg}_c{ch}_{j}",
                                                          f"ok{sfx}") + " (issued early)")
        if prefetch:
            out += [f"v{idx}_pf{ch}_{j} = " + self._load(idx, ins, f"in{ins.arg}_r{c} + {lay.TY} * in{ins.arg}_sm"
                                                        f" + in{ins.arg}_c{ch}_{j}", f"okm_pf{ch} & okn_{ch}_{j}")
                    for j in range(lay.RN) for idx, ins in rowwise]
        return out

    def _staged_values(self, c, iv, staged):
        """Per row: the staged inputs' values, from shared memory (zero past the edges)."""
        lay, out = self.lay, []
        for idx, ins in staged:
            base, pitch, loader = self.staged[ins.arg]
            out += [f"v{idx}_{c}_{j} = {loader}({base}, (ty + {iv} * {lay.TY}) * {pitch} + tx + {j * lay.TX})"
                    f"    # %{idx} = load {self.p.inputs[ins.arg].name} (staged)" for j in range(lay.RN)]
        return out

    def _row_elements(self, ch, c, iv, value):
        """Per row: every in-bounds element's code, then the row partials (parked, or combined
        across the row's lanes)."""
        lay, m, out = self.lay, f"m_{c}", []
        for j in range(lay.RN):
            sfx = f"_{c}_{j}"
            out += self.element(value(iv, j), j, m, f"n_{ch}_{j}", sfx, row=f"_{c}",
                                at=lambda t, j=j: f"{t}_r{c} + {t}_c{ch}_{j}", ok=f"ok{sfx}")
        for slot, k in enumerate(self._row_reductions()):
            if self.row_park:
                stg, pitch = self.row_park
                out.append(f"sts({stg}, (ty + {iv} * {lay.TY}) * {pitch} + {slot * lay.TX} + tx, q{k}_{c})"
                           "    # park the row partial in this lane's own staged element")
            else:
                out += self._row_combine(k, f"q{k}_{c}", m)
        return out

    def _row_reductions(self):
        return [k for k, kind in enumerate(self.kinds) if kind == "row"]

    def _parked_row_combine(self, row0):
        """After a chunk whose row partials are parked (one per lane and row, in the staging row,
        written over the element the lane itself read there): each row of warp ty is combined by
        TX // RM lanes, each over TX // (TX // RM) partials in a fixed, lane-rotated order (the
        rotation puts the lanes' reads in distinct banks), then by an xor butterfly across those
        lanes; one global combine per row and CTA. Fixed order: deterministic."""
        lay, (stg, pitch), out = self.lay, self.row_park, []
        lanes = lay.TX // lay.RM              # lanes per row
        each = lay.TX // lanes                # partials per lane
        out += ["cuda.syncwarp()    # every lane's row partials are parked",
                f"rr = tx // {lanes}    # the row of this warp this lane combines",
                f"hh = tx % {lanes}",
                f"m_rr = {row0} + ty + rr * {lay.TY}"]
        for slot, k in enumerate(self._row_reductions()):
            red = self.p.reductions[k]
            out += [f"a{k} = {identity(red)}    # {red.name}",
                    f"base{k} = (ty + rr * {lay.TY}) * {pitch} + {slot * lay.TX} + hh * {each}",
                    f"for e in range({each}):",
                    f"    a{k} = {combine(red, f'a{k}', f'lds({stg}, base{k} + ((e + rr) & {each - 1}))')}"]
            s = lanes // 2
            while s >= 1:
                out.append(f"a{k} = {combine(red, f'a{k}', f'shfl_xor(a{k}, {s})')}")
                s //= 2
            out += [f"if (hh == 0) & (m_rr < M):", f"    {self.global_combine(k, f'a{k}', 'm_rr', None)}    # {red.name}"]
        return out

    def _row_combine(self, k, q, m):
        """Combine the row partial `q` across the TX lanes that own the row (xor butterfly), then
        one global combine per row and CTA."""
        red, lay, out = self.p.reductions[k], self.lay, []
        s = lay.TX // 2
        while s >= 1:
            out.append(f"{q} = {combine(red, q, f'shfl_xor({q}, {s})')}    # row combine across tx")
            s //= 2
        out.append(f"if (tx == 0) & ({m} < M):")
        out.append(f"    {self.global_combine(k, q, m, None)}    # {red.name}")
        return out

    def element(self, accum_src, j, m, n, sfx, row, at, ok):
        """Straight-line code for one element (m, n) (tree_lines). at(t): the source of the
        element's offset in tensor t; ok: the source of its bound check. The math runs unguarded
        (its inputs are zero past the edges; a value computed there is never used) and only
        stores and reductions test `ok`: a branch around each element kept the compiler from
        overlapping one element's shared- and global-memory latency with the next element's work."""
        return tree_lines(self.p, accum_src, sfx, lambda idx, ins, src: self._store(idx, ins, src, m, n, at, ok),
                          lambda idx, ins, src: self._reduce(idx, ins, src, j, m, n, row, ok))

    def _store(self, idx, ins, src, m, n, at, ok):
        """A predicated store (ptx.st_*_if): straight-line code. An output that does not span an
        axis is written only at coordinate 0 of it."""
        t = self.p.outputs[ins.arg]
        sl, sm, sn = self.p.spans(t)
        guard = [c for c, s in (("(l == 0)", sl), (f"({m} == 0)", sm), (f"({n} == 0)", sn)) if not s]
        return [f"{_STORERS[t.dtype]}_if(out{ins.arg}_p, {at(f'out{ins.arg}')}, {src}, {' & '.join([ok] + guard)})"
                f"    # %{idx} = store {t.name}"]

    def _reduce(self, idx, ins, src, j, m, n, row, ok):
        k, red = ins.arg, self.p.reductions[ins.arg]
        contrib = f"-{src}" if red.op is Op.AMIN else src
        note = f"    # %{idx} = {red.op.value} -> {red.name}"
        kind = self.kinds[k]
        if kind == "elem":
            return [f"if {ok}:", "    " + self.global_combine(k, contrib, m, n) + note]
        p = {"all": f"p{k}", "col": f"p{k}_{j}", "row": f"q{k}{row}"}[kind]
        return [f"{p} = {combine(red, p, contrib)} if {ok} else {p}{note}"]

    # ---- CTA-level combines ------------------------------------------------------------------

    def global_combine(self, k, value, m, n):
        return global_combine(self.p.reductions[k], self.det, k, value, m, n)

    def epilogue_end(self):
        """After the last chunk: combine col and all partials across the CTA."""
        lay, out, base = self.lay, [], self.shared_offset
        for k, (red, kind) in enumerate(zip(self.p.reductions, self.kinds)):
            if kind == "col":
                out.append(f"# {red.name}: park column partials, combine across ty in order")
                out += [f"sts(scratch, {base} + ty * {lay.cols} + tx + {j * lay.TX}, p{k}_{j})" for j in range(lay.RN)]
                out.append(self.barrier)
                out.append(f"for c in range(tid, {lay.cols}, {lay.threads}):")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range({lay.TY}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base} + t * {lay.cols} + c)')}")
                out.append("    n = n0 + c")
                out.append("    if n < N:")
                out.append(f"        {self.global_combine(k, 'a', None, 'n')}")
                out.append(self.barrier)
            elif kind == "all":
                w = min(32, lay.threads)
                out.append(f"# {red.name}: every thread's partial, combined in two ordered passes")
                out.append(f"sts(scratch, {base} + tid, p{k})")
                out.append(self.barrier)
                out.append(f"if tid < {w}:")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range(tid, {lay.threads}, {w}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base} + t)')}")
                out.append(f"    sts(scratch, {base + lay.threads} + tid, a)")
                out.append(self.barrier)
                out.append("if tid == 0:")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range({w}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base + lay.threads} + t)')}")
                out.append(f"    {self.global_combine(k, 'a', None, None)}")
                out.append(self.barrier)
        return out
