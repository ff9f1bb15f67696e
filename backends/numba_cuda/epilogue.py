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
  row  - over N only:  one partial per owned row, combined across tx (per chunk);
  elem - over L only:  every element is its own output, combined straight into global memory.
AMIN is carried as AMAX of the negated value everywhere (workspace included) so only two combine
operators exist; the finishing kernel negates back. Every CTA-level combine runs in a fixed
order, so with `deterministic=True` (one workspace slot per CTA, no atomics) results are
bit-identical run to run.
"""
from dataclasses import dataclass

from evt_core.tree.ops import Op

from .spelling import spell

_LOADERS = {"float32": "ld_f32", "float16": "ld_f16", "bfloat16": "ld_bf16"}
_STORERS = {"float32": "st_f32", "float16": "st_f16", "bfloat16": "st_bf16"}


def reduction_kind(red):
    over = red.over
    if "M" in over and "N" in over:
        return "all"
    if "M" in over:
        return "col"
    if "N" in over:
        return "row"
    return "elem"


def combine(red, a, b):
    """Source of the fp32 combine of two partials of `red`."""
    return f"({a} + {b})" if red.op in (Op.SUM, Op.MEAN) else f"nan_max({a}, {b})"


def identity(red):
    return "ZERO" if red.op in (Op.SUM, Op.MEAN) else "NEG_INF"


@dataclass(frozen=True)
class Layout:
    """The epilogue's thread layout (see module docstring). `rows_unrolled`: emit the i loop
    unrolled (values live in registers indexed by constants) or as a run-time loop (values come
    from shared memory)."""
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

    def __init__(self, program, layout, deterministic):
        self.p, self.lay, self.det = program, layout, deterministic
        self.kinds = [reduction_kind(r) for r in program.reductions]
        # Shared scratch (fp32 elements): one region per row reduction (their partials are
        # parked per chunk), then one region reused by col/all reductions after the loop.
        lay = layout
        self.row_offset = {}
        off = 0
        for k, kind in enumerate(self.kinds):
            if kind == "row":
                self.row_offset[k] = off
                off += lay.rows * lay.TX
        self.shared_offset = off
        self.scratch_size = max(1, off + max(lay.TY * lay.cols, lay.threads + 32))

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
        """Lines evaluating every element of the rows [row0, row0 + layout.rows)."""
        lay, out = self.lay, []
        self._chunks = getattr(self, "_chunks", 0) + 1
        rows = range(lay.RM) if lay.rows_unrolled else [None]
        for i in rows:
            ind = ""
            iv = str(i) if i is not None else "i"
            if i is None:
                out.append(f"for i in range({lay.RM}):")
                ind = "    "
            # Unique names per element instance: numba's SSA passes are slow on reassignment.
            c = f"{self._chunks}_{iv}"
            m = f"m_{c}"
            out.append(f"{ind}{m} = {row0} + ty + {iv} * {lay.TY}")
            for k, kind in enumerate(self.kinds):
                if kind == "row":
                    out.append(f"{ind}q{k} = {identity(self.p.reductions[k])}    # row partial of {self.p.reductions[k].name}")
            for j in range(lay.RN):
                n = f"n_{c}_{j}"
                out.append(f"{ind}{n} = n0 + tx + {j * lay.TX}")
                out.append(f"{ind}if ({m} < M) & ({n} < N):")
                out += [ind + "    " + s for s in self.element(value(iv, j), j, m, n, f"_{c}_{j}")]
            for k, kind in enumerate(self.kinds):
                if kind == "row":
                    out.append(f"{ind}sts(scratch, {self.row_offset[k]} + (ty + {iv} * {lay.TY}) * {lay.TX} + tx, q{k})")
        return out + self._finish_rows(row0)

    def element(self, accum_src, j, m="m", n="n", sfx=""):
        """Straight-line code for one in-bounds element (m, n): one line per IR instruction."""
        p, lines = self.p, []
        for idx, ins in enumerate(p.instrs):
            v = f"v{idx}{sfx}"
            a = [f"v{x}{sfx}" for x in ins.args]
            if ins.op is Op.ACCUM:
                lines.append(f"{v} = {accum_src}    # %{idx} = accum")
            elif ins.op is Op.LOAD:
                t = p.inputs[ins.arg]
                lines.append(f"{v} = {_LOADERS[t.dtype]}(in{ins.arg}_p, in{ins.arg}_lo + {m} * in{ins.arg}_sm + "
                             f"{n} * in{ins.arg}_sn)    # %{idx} = load {t.name}")
            elif ins.op is Op.SCALAR:
                lines.append(f"{v} = sc{ins.arg}    # %{idx} = scalar {p.scalars[ins.arg]}")
            elif ins.op is Op.CONST:
                lines.append(f"{v} = float32({float(ins.arg)!r})    # %{idx} = const")
            elif ins.op is Op.STORE:
                lines += self._store(idx, ins, a[0], m, n)
            elif ins.op in (Op.SUM, Op.MEAN, Op.AMAX, Op.AMIN):
                lines += self._reduce(idx, ins, a[0], j, m, n)
            else:
                lines.append(f"{v} = {spell(ins.op, a)}    # %{idx} = {ins.op.value}")
        return lines

    def _store(self, idx, ins, src, m, n):
        t = self.p.outputs[ins.arg]
        sl, sm, sn = self.p.spans(t)
        # An output that does not span an axis is written only at coordinate 0 of it.
        guard = [c for c, s in (("(l == 0)", sl), (f"({m} == 0)", sm), (f"({n} == 0)", sn)) if not s]
        call = (f"{_STORERS[t.dtype]}(out{ins.arg}_p, out{ins.arg}_lo + {m} * out{ins.arg}_sm + "
                f"{n} * out{ins.arg}_sn, {src})    # %{idx} = store {t.name}")
        if guard:
            return [f"if {' & '.join(guard)}:", "    " + call]
        return [call]

    def _reduce(self, idx, ins, src, j, m, n):
        k, red = ins.arg, self.p.reductions[ins.arg]
        contrib = f"-{src}" if red.op is Op.AMIN else src
        note = f"    # %{idx} = {red.op.value} -> {red.name}"
        kind = self.kinds[k]
        if kind == "all":
            return [f"p{k} = {combine(red, f'p{k}', contrib)}{note}"]
        if kind == "col":
            return [f"p{k}_{j} = {combine(red, f'p{k}_{j}', contrib)}{note}"]
        if kind == "row":
            return [f"q{k} = {combine(red, f'q{k}', contrib)}{note}"]
        return [self.global_combine(k, contrib, m, n) + note]

    # ---- CTA-level combines ------------------------------------------------------------------

    def global_combine(self, k, value, m, n):
        """One combine of `value` into reduction k's fp32 workspace at (l, m, n) kept coords."""
        red = self.p.reductions[k]
        lw = "l" if ("L" not in red.over or self.det) else "0"
        mw = m if "M" not in red.over else ("tile_m" if self.det else "0")
        nw = n if "N" not in red.over else ("tile_n" if self.det else "0")
        at = f"({lw} * ws{k}_wm + {mw}) * ws{k}_wn + {nw}"
        if self.det:
            return f"st_f32(ws{k}, {at}, {value})"
        return f"{'red_add' if red.op in (Op.SUM, Op.MEAN) else 'red_max'}(ws{k}, {at}, {value})"

    def _finish_rows(self, row0):
        lay, out = self.lay, []
        ks = [k for k, kind in enumerate(self.kinds) if kind == "row"]
        if not ks:
            return out
        out.append("cuda.syncthreads()    # row partials parked; combine each row across tx in order")
        out.append(f"for r in range(tid, {lay.rows}, {lay.threads}):")
        out.append(f"    m = {row0} + r")
        for k in ks:
            red = self.p.reductions[k]
            out.append(f"    a = {identity(red)}")
            out.append(f"    for t in range({lay.TX}):")
            out.append(f"        a = {combine(red, 'a', f'lds(scratch, {self.row_offset[k]} + r * {lay.TX} + t)')}")
            out.append("    if m < M:")
            out.append(f"        {self.global_combine(k, 'a', 'm', None)}    # {red.name}")
        out.append("cuda.syncthreads()    # scratch is reused by the next chunk")
        return out

    def epilogue_end(self):
        """After the last chunk: combine col and all partials across the CTA."""
        lay, out, base = self.lay, [], self.shared_offset
        for k, (red, kind) in enumerate(zip(self.p.reductions, self.kinds)):
            if kind == "col":
                out.append(f"# {red.name}: park column partials, combine across ty in order")
                out += [f"sts(scratch, {base} + ty * {lay.cols} + tx + {j * lay.TX}, p{k}_{j})" for j in range(lay.RN)]
                out.append("cuda.syncthreads()")
                out.append(f"for c in range(tid, {lay.cols}, {lay.threads}):")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range({lay.TY}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base} + t * {lay.cols} + c)')}")
                out.append("    n = n0 + c")
                out.append("    if n < N:")
                out.append(f"        {self.global_combine(k, 'a', None, 'n')}")
                out.append("cuda.syncthreads()")
            elif kind == "all":
                w = min(32, lay.threads)
                out.append(f"# {red.name}: every thread's partial, combined in two ordered passes")
                out.append(f"sts(scratch, {base} + tid, p{k})")
                out.append("cuda.syncthreads()")
                out.append(f"if tid < {w}:")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range(tid, {lay.threads}, {w}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base} + t)')}")
                out.append(f"    sts(scratch, {base + lay.threads} + tid, a)")
                out.append("cuda.syncthreads()")
                out.append("if tid == 0:")
                out.append(f"    a = {identity(red)}")
                out.append(f"    for t in range({w}):")
                out.append(f"        a = {combine(red, 'a', f'lds(scratch, {base + lay.threads} + t)')}")
                out.append(f"    {self.global_combine(k, 'a', None, None)}")
                out.append("cuda.syncthreads()")
        return out
