"""The sm_90a kernel's fragment epilogue: the tree evaluated on the wgmma accumulator fragment
itself, its 16-bit outputs written as packed pairs into 128B-swizzled 64 x 64 panels and sent
to global memory by TMA stores (the cupy backend's design, hopper-gemm-notes §9).

Why, against the staged epilogue (epilogue_sm90.py, still the path for everything this one
refuses): on the H200 the staged R0 kernel spent 10.7 us of 81.5 on writing the fp32 fragments
to shared memory (4.9-way bank conflicts) and 22 us on the per-element loop that reads them
back and stores 2-byte elements with 64-bit address math (ncu: 24.1 M instructions against
cupy's 9.8 M). Here an element costs its math, one half of a cvt-and-pack and half of a 32-bit
shared store at a per-thread base plus a constant; TMA clips the stores at the edges.

Fragment map (backends/gpu/sm90.fragment_position): thread (warp w, lane = 4 fg + fq) of a
warpgroup holds d[4j + 2r + e] of an m64nBN fragment (BN = 128 or 256, the variant's tile
width) at row 16 w + fg + 8 r, column 8 j + 2 fq + e. So a row lives in the 4 lanes of a quad
(row reductions: 2 xor shuffles, then one combine per row and tile) and a column in the 8
quads of a warp (column reductions: a reduce-scatter over 3 xor levels, then the 4 warps meet in
shared memory).

Swizzle: in a 128B-swizzled panel, row y's 16-byte chunk c sits at chunk c ^ (y % 8). A
fragment row's y % 8 is fg, so a warp's 32 pair stores hit 8 distinct chunks x 4 words: no bank
conflict. (M, N) inputs are copied by cp.async (epilogue_sm90.aux_copy_lines) into rows padded
to AUX_PITCH elements, which makes the fragment's 2-byte reads conflict-free as well; an fp32
input (XML-CNN's targets) is read a column pair per 64-bit load, conflict-free too (_pair_read).
"""
from evt_core.tree.ops import Op

from ...gpu import overlap, sm90
from ...gpu.reductions import reduction_kind
from .epilogue import _LOADERS, combine, global_combine, identity, tree_lines
from .epilogue_sm90 import SMEM_LOADERS as _STAGED_LOADERS, tile_inputs
from .frag_layout import AUX_PITCH, column_vectors
from .fragment_stores import panel_store, tile_stores
from .warp_combine import column_functions, comb, shfl

PANEL_BYTES = sm90.PANEL_BYTES      # 64 x 64 16-bit elements, 8 KB
_PAIR_STORERS = {"float16": "sts_pair_f16", "bfloat16": "sts_pair_bf16"}
_SMEM_LOADERS = {t: _STAGED_LOADERS[t] for t in ("float16", "bfloat16")}   # 16-bit: one element per read
_PAIR_READ = "float32"      # a staged fp32 input is read a column pair at a time (lds_f32x2)
_RING_PAIR_LOADERS = {"float16": "lds_pair_f16", "bfloat16": "lds_pair_bf16"}   # aux_ring: a packed pair
_RING_PAIR_WIDENERS = {"float16": "pair_of_f16", "bfloat16": "pair_of_bf16"}      # ... of a preloaded word


def refusal(program):
    """None when every tree of this program can take the fragment epilogue, else why not (the
    call-dependent conditions, strides and alignment, are select.sm90_fragment's)."""
    for t in program.outputs:
        if t.dtype not in _PAIR_STORERS:
            return f"output {t.name!r} is {t.dtype} (TMA-stored panels are 16-bit)"
        if not all(program.spans(t)[1:]):
            return f"output {t.name!r} does not span M and N"
    for red in program.reductions:
        if reduction_kind(red) == "elem":
            return f"reduction {red.name!r} is over L only (an atomic per element)"
    for k in tile_inputs(program):
        if program.inputs[k].dtype not in _SMEM_LOADERS and program.inputs[k].dtype != _PAIR_READ:
            return f"(M, N) input {program.inputs[k].name!r} is {program.inputs[k].dtype} (no staged reader)"
    return None


def thread_columns(lay):
    """(register name suffix, tile column) of the columns thread tid of a warpgroup handles in
    per-column work (a column vector's load, a column reduction's last combine): column tid,
    and tid + 128 of a 256-wide tile."""
    return [(f"_{i}" if i else "", f"tid + {128 * i}" if i else "tid") for i in range(lay.bn // 128)]


def vector_loads(program, lay, l="l", n0="n0", into="bv", guard=""):
    """At a consumer's tile start, before its mainloop: thread tid loads column n0 + tid (and
    n0 + tid + 128 of a 256-wide tile) of each column vector (zero past N) into a register,
    which the epilogue stores to the warpgroup's shared slice (the load's latency hides under
    the mainloop; one load per thread, tile and 128 columns instead of 32, a warpgroup's
    coalesced). l, n0: the tile's names; into: the registers' prefix; guard: a further
    condition for loading at all (else zero)."""
    out = []
    for k in lay.vecs:
        t = program.inputs[k]
        for sfx, col in thread_columns(lay):
            ok = f"({guard}) & ({n0} + {col} < N)" if guard else f"{n0} + {col} < N"
            out.append(f"{into}{k}{sfx} = {_LOADERS[t.dtype]}(in{k}_p, {l} * in{k}_sl + ({n0} + {col}) * in{k}_sn) "
                       f"if {ok} else ZERO    # {t.name}: this thread's column of the tile")
    return out


def _loaded(program):
    """Indices of the inputs the tree loads, in order."""
    return sorted({ins.arg for ins in program.instrs if ins.op is Op.LOAD})


def _partial_names(program, kinds, row, col):
    """The partials one pair updates: a row reduction's of its row, a column reduction's of its
    two columns, a whole-tile reduction's one."""
    out = []
    for k, kind in enumerate(kinds):
        out += {"row": [f"q{k}{row}"], "col": [f"p{k}{col}0", f"p{k}{col}1"], "all": [f"p{k}"]}[kind]
    return out


def _oks(kinds, okm, okn):
    """Bound checks a pair's reductions need: the row's (column reductions), the two columns'
    (row reductions), both (whole-tile reductions)."""
    return [okm, *okn] if kinds else []


def pair_function(program, fast=()):
    """Module-level source of epi_pair: the tree on one fragment pair (two elements of a row,
    adjacent columns), storing each output's packed pair to its staging address and returning
    the updated reduction partials. One numba device function called per pair (by epi_group),
    inlined by LLVM (forceinline): the same code as writing every element out in the kernel,
    but numba types and lowers the tree once instead of 64 or 128 times (10 s against 1 s for W1).
    `fast`: the instructions spelled with MUFU approximations (backends/gpu/fastmath.fast_ops)."""
    kinds = [reduction_kind(r) for r in program.reductions]
    params = ["a_0", "a_1"] + [f"x{k}_{e}" for k in _loaded(program) for e in range(2)]
    params += [f"sc{k}" for k in range(len(program.scalars))]
    params += [f"ob{k}" for k in range(len(program.outputs))]
    parts = _partial_names(program, kinds, "", "_")
    params += parts + _oks(kinds, "okm", ["okn0", "okn1"])
    body = []
    for e in range(2):
        sfx = f"_{e}"
        body += [f"v{idx}{sfx} = x{ins.arg}{sfx}" for idx, ins in enumerate(program.instrs) if ins.op is Op.LOAD]
        body += tree_lines(program, f"a{sfx}", sfx,
                           lambda idx, ins, src, sfx=sfx: [f"o{ins.arg}{sfx} = {src}    # %{idx} = store"],
                           lambda idx, ins, src, e=e: _pair_reduce(program, kinds, ins.arg, src, e), fast)
    body += [f"{_PAIR_STORERS[t.dtype]}(ob{k}, o{k}_0, o{k}_1)    # {t.name}" for k, t in enumerate(program.outputs)]
    body.append(f"return {', '.join(parts)}," if parts else "return 0")
    return ("@cuda.jit(device=True, forceinline=True)\n"
            f"def epi_pair({', '.join(params)}):\n" + "\n".join("    " + x for x in body) + "\n")


def _pair_reduce(program, kinds, k, src, e):
    red, kind = program.reductions[k], kinds[k]
    c = f"-{src}" if red.op is Op.AMIN else src
    part, ok = {"row": (f"q{k}", f"okn{e}"), "col": (f"p{k}_{e}", "okm"), "all": (f"p{k}", f"(okm & okn{e})")}[kind]
    return [f"{part} = {combine(red, part, c)} if {ok} else {part}    # {red.name}"]


def device_functions(program, lay, fast=(), preload=False):
    """The module-level device functions of a fragment-epilogue kernel: epi_pair, epi_group and
    epi_col<k> per column reduction. preload: the ring inputs' words come in as arguments
    (fragment_chunks with a release)."""
    frags = ["acc0", "acc1"] if lay.pingpong else ["acc"]
    wr = _Writer(program, lay, frags, False, preload)
    return "\n\n".join(x for x in (pair_function(program, fast), wr.group_function(), column_functions(program, lay)) if x)


def consumer_prologue(program):
    """Once per consumer thread, before its tile loop: acquire the output maps (written by the
    host into global memory) for the TMA stores."""
    return ["if tid == 0:"] + [f"    tensormap_acquire(tmO{k})" for k in range(len(program.outputs))]


def consumer_epilogue():
    """After the consumer's last tile: its TMA stores are complete before the CTA exits."""
    return ["if tid == 0:", "    bulk_wait0()"]


def fragment_lines(program, lay, frags, deterministic):
    """Per tile, after the final wgmma wait (names m0, n0, mt, nt, l, wg, tid, it, tile, tiles
    and the fragments `frags`, one m64 tuple per 64 rows; abuf<k> set at the tile's start)."""
    return _Writer(program, lay, frags, deterministic).lines()


def fragment_chunks(program, lay, frags, deterministic, n, release=None):
    """fragment_lines cut into n pieces at column-group boundaries, in order (the overlapped
    schedule runs a tile's epilogue a piece at a time between the next tile's k-blocks): the
    first piece holds the setup, the last the combines and the TMA stores. release: lines that
    give the tile's ring slots back; given, the first piece reads every ring input word the
    thread needs into registers (preload_words) and runs them right after."""
    return _Writer(program, lay, frags, deterministic, preload=release is not None).chunks(n, release or [])


def preload_words(lay):
    """Registers a consumer thread holds from its epilogue's start when the ring inputs are read
    up front: one packed pair per input, column group and row (backends/gpu/overlap.py)."""
    return overlap.preload_words(len(lay.ring_inputs), lay.bn)


class _Writer:
    def __init__(self, program, lay, frags, det, preload=False):
        self.p, self.lay, self.frags, self.det = program, lay, frags, det
        self.kinds = [reduction_kind(r) for r in program.reductions]
        self.rows = [(h, r) for h in range(len(frags)) for r in range(2)]
        self.cols = [(j, e) for j in range(lay.bn // 8) for e in range(2)]
        sp = [program.spans(t) for t in program.inputs]
        self.bcast = column_vectors(program)                                # a value per column
        self.rowvec = [k for k, s in enumerate(sp) if s[1] and not s[2]]     # a value per row
        self.const = [k for k, s in enumerate(sp) if not s[1] and not s[2]]  # one value per tile
        self.staged = tile_inputs(program)
        assert not (self.staged and lay.pingpong), "staged inputs are per cooperative warpgroup"
        self.ring = list(lay.ring_inputs)      # read from their TMA-loaded panels in the ring
        self.copied = list(lay.aux)            # read from their cp.async-copied padded rows
        assert set(self.staged) == set(self.ring) | set(self.copied), "every (M, N) input staged"
        self.preload = preload and bool(self.ring)    # ring words read up front (fragment_chunks)

    def lines(self):
        """Column group by column group (j): one call of the group function (group_function) per
        group, both fragments' rows of it. A column vector's two values per group are read
        from the tile's shared slice inside it, just ahead of its pairs, and die after it (held
        all up front, 32 of them beside ping-pong's 128 accumulators made W1 spill 90 registers)."""
        if not self.lay.recycles:
            return self.chunks(1)[0]
        # each 64-column panel goes to the TMA as soon as its 8 groups are written; column and
        # whole-tile combines (barriers over the scratch) come after the last panel
        out = self._head() + self._partials() + self._loads()
        for c in range(self.lay.panels):
            for j in range(8 * c, 8 * c + 8):
                out += self._group(j)
            out += panel_store(self.p, self.lay, c)
        return out + self._combines(rows=False) + self._combines(rows=True)

    def chunks(self, n, release=()):
        """lines() in n pieces, the column groups spread evenly (whole staging only); with
        preload, the ring words are read and `release` runs before the first group."""
        assert not self.lay.recycles and 1 <= n <= self.lay.bn // 8, n
        groups = self.lay.bn // 8
        out = [[] for _ in range(n)]
        out[0] += self._head() + self._partials() + self._loads()
        if self.preload:
            out[0] += self._preloads() + ["named_bar_sync(1 + wg, 128)   # the warpgroup's ring words are read"]
            out[0] += list(release)
        for j in range(groups):
            out[overlap.piece_of_group(j, groups, n)] += self._group(j)
        # row combines (registers, shuffles, one global combine per row) after the stores are
        # issued, so the TMA stores do not wait behind the shuffle chains; column and whole-tile
        # combines meet in the scratch behind barriers, ahead of them as before
        out[-1] += self._combines(rows=False) + tile_stores(self.p, self.lay) + self._combines(rows=True)
        return out

    def _head(self):
        lay, pp = self.lay, self.lay.pingpong
        out = ["# ---- fused epilogue on the fragments; outputs by TMA from swizzled panels ----",
               "w = tid // 32      # warp of the warpgroup: rows 16 w + fg and + 8",
               "fg = (tid % 32) // 4",
               "fq = tid % 4       # columns 2 fq, 2 fq + 1 of every 8",
               f"scratch = sbase + {lay.scratch} + wg * {lay.scratch_bytes}",
               "tile_n = nt"]
        out += (["m0w = m0", "tile_m = mt    # deterministic partial slot: one per 128-row tile"] if pp else
                [f"m0w = m0 + {sm90.WG_ROWS} * wg", "tile_m = mt * 2 + wg   # deterministic slot: one per 64 rows"])
        out += [f"in{k}_lo = l * in{k}_sl    # {op.name}" for k, op in enumerate(self.p.inputs)]
        # A column vector's slice is the warpgroup's own (ping-pong warpgroups are on different
        # tiles; cooperative ones would need a CTA-wide barrier to share one): rewritten here,
        # after every thread of the warpgroup passed the previous tile's "every pair is staged"
        # barrier (its last read of the slice), published by the barrier below.
        vec = [f"sts(sbase + {off} + wg * {lay.vec_bytes}, {col}, bv{k}{sfx})    # {self.p.inputs[k].name}"
               for k, off in lay.vecs.items() for sfx, col in thread_columns(lay)]
        if pp:
            out += ["if it > 0:", "    named_bar_sync(5 + wg, 256)   # the other warpgroup's stores have read the staging"]
            if vec:
                out += vec + ["named_bar_sync(1 + wg, 128)   # the tile's column vectors are in shared memory"]
        else:
            if lay.aux:
                out.append("cp_async_wait_0()    # this thread's input copies have landed (the barrier: everyone's)")
            out += vec
            out += ["if tid == 0:", "    bulk_wait_read0()   # this warpgroup's previous stores have read its staging",
                    "named_bar_sync(1 + wg, 128)"]
        rh = "" if pp else f" + wg * {lay.out_panels * PANEL_BYTES}"
        # the staging and vector addresses below are loop-invariant: through per_tile they are
        # computed per tile, where LLVM would hoist all 64-128 of them out of the tile loop
        out.append("tbase = per_tile(sbase)")
        out += [f"obase{k} = tbase + {off}{rh} + (16 * w + fg) * 128 + 4 * fq    # {t.name}"
                for k, (off, t) in enumerate(zip(lay.outs, self.p.outputs))]
        if self.copied:
            out.append(f"arow = (16 * w + fg) * {AUX_PITCH} + 2 * fq")
        out += self._ring_panels()
        if self._need_n():
            out.append("nlim = N - n0 - 2 * fq    # this thread's columns 8 j + e are in range while 8 j + e < nlim")
        out += [f"vrow{k} = tbase + {off} + wg * {lay.vec_bytes} + 8 * fq    # {self.p.inputs[k].name}: "
                "this thread's column pair of group 0" for k, off in lay.vecs.items()]
        if self._need_m():
            for h, r in self.rows:
                out += [f"m_{h}{r} = m0w + {64 * h + 8 * r} + 16 * w + fg", f"okm_{h}{r} = m_{h}{r} < M"]
        return out

    def _need_n(self):
        return bool(self.kinds)     # (the pair function takes every bound check; column vectors are zero past N)

    def _need_m(self):
        return bool(self.rowvec) or bool(self.kinds)

    def _partials(self):
        out = []
        for k, (red, kind) in enumerate(zip(self.p.reductions, self.kinds)):
            i = identity(red)
            if kind == "all":
                out.append(f"p{k} = {i}    # {red.name}")
            elif kind == "col":
                out += [f"p{k}_{j}{e} = {i}" for j, e in self.cols]
            else:
                out += [f"q{k}_{h}{r} = {i}" for h, r in self.rows]
        return out

    def _load(self, k, off, ok):
        t = self.p.inputs[k]
        return f"{_LOADERS[t.dtype]}(in{k}_p, in{k}_lo + {off}) if {ok} else ZERO    # {t.name}"

    def _loads(self):
        """Inputs that span neither M nor N, or M only, loaded once per tile and thread, ahead of the math."""
        out = [f"vc{k} = {_LOADERS[self.p.inputs[k].dtype]}(in{k}_p, in{k}_lo)" for k in self.const]
        for k in self.rowvec:
            out += [f"vr{k}_{h}{r} = " + self._load(k, f"m_{h}{r} * in{k}_sm", f"okm_{h}{r}") for h, r in self.rows]
        return out

    def _preloads(self):
        """Every ring input word of the thread's rows in every column group: group j's chunk of
        its swizzled row sits at (fg ^ (j % 8)) x 16 in panel j // 8."""
        return [f"xw{k}_{j}_{h}{r} = lds_u32(apan{k}_{j // 8} + {1024 * r} + (fg ^ {j % 8}) * 16)"
                f"    # {self.p.inputs[k].name}" for k in self.ring for j in range(self.lay.bn // 8)
                for h, r in self.rows]

    def _group_params(self):
        """(group function parameter, kernel argument of column group j) pairs, in order."""
        pp = []
        pp += [(f"f{h}", lambda j, acc=acc: f"{acc}[{4 * j}:{4 * j + 4}]") for h, acc in enumerate(self.frags)]
        pp.append(("fg", None))
        pp += [("nlim", None)] if self._need_n() else []
        pp += [(f"vrow{k}", None) for k in self.bcast]
        pp += [(f"vc{k}", None) for k in self.const]
        pp += [(f"vr{k}_{h}{r}", None) for k in self.rowvec for h, r in self.rows]
        pp += [(f"abuf{k}", None) for k in self.copied] + ([("arow", None)] if self.copied else [])
        if self.preload:
            pp += [(f"xw{k}_{h}{r}", lambda j, k=k, h=h, r=r: f"xw{k}_{j}_{h}{r}") for k in self.ring
                   for h, r in self.rows]
        else:
            pp += [(f"apan{k}", lambda j, k=k: f"apan{k}_{j // 8}") for k in self.ring]
        pp += [(f"sc{k}", None) for k in range(len(self.p.scalars))]
        pp += [(f"obase{k}", None) for k in range(len(self.p.outputs))]
        pp += [(x, lambda j, i=i: self._group_partials(f"_{j}")[i]) for i, x in enumerate(self._group_partials("_"))]
        pp += [(f"okm_{h}{r}", None) for h, r in self.rows] if self.kinds else []
        return pp

    def _group_partials(self, col):
        """The partials one column group updates: every row reduction's of its rows, a column
        reduction's of its two columns, a whole-tile reduction's one."""
        out = []
        for k, kind in enumerate(self.kinds):
            out += {"row": [f"q{k}_{h}{r}" for h, r in self.rows], "col": [f"p{k}{col}0", f"p{k}{col}1"],
                    "all": [f"p{k}"]}[kind]
        return out

    def group_function(self):
        """Module-level source of epi_group: the pairs of one 8-column group j (2 rows per
        fragment, the elements 4 j .. 4 j + 3 of each), one epi_pair call each. numba types
        the kernel's calls one by one: 16 calls of this function instead of 32 or 64 of
        epi_pair (and their per-call address and bound-check arithmetic, spelled here once)
        halve the front end's time; LLVM inlines both (forceinline), so the code is the same."""
        buf = "((j >> 3) & 1)" if self.lay.recycles else "(j >> 3)"     # panel j // 8's staging buffer
        out = ["c = 8 * j",
               f"xo = (fg ^ (j & 7)) * 16 + {buf} * {PANEL_BYTES}   # the group's 16-byte chunk of its "
               "swizzled row, in its 64-column panel's buffer"]
        if self._need_n():
            out += ["okn_0 = c < nlim", "okn_1 = c + 1 < nlim"]
        out += [f"vb{k}_0, vb{k}_1 = lds_f32x2(vrow{k} + 4 * c)    # {self.p.inputs[k].name}" for k in self.bcast]
        out += [f"xs{k}_{h}{r}_0, xs{k}_{h}{r}_1 = lds_f32x2(abuf{k} + 4 * (arow + {8 * r * AUX_PITCH} + c))"
                f"    # {self.p.inputs[k].name}" for k in self._pair_read() if k in self.copied for h, r in self.rows]
        if self.preload:
            out += [f"xs{k}_{h}{r}_0, xs{k}_{h}{r}_1 = {_RING_PAIR_WIDENERS[self.p.inputs[k].dtype]}(xw{k}_{h}{r})"
                    f"    # {self.p.inputs[k].name}" for k in self.ring for h, r in self.rows]
        elif self.ring:
            out.append("xa = (fg ^ (j & 7)) * 16    # the group's 16-byte chunk of a swizzled panel row")
            out += [f"xs{k}_{h}{r}_0, xs{k}_{h}{r}_1 = {_RING_PAIR_LOADERS[self.p.inputs[k].dtype]}(apan{k} + "
                    f"{1024 * r} + xa)    # {self.p.inputs[k].name}" for k in self.ring for h, r in self.rows]
        pp = self.lay.pingpong
        for h, r in self.rows:
            const = (h * self.lay.out_panels * PANEL_BYTES if pp else 0) + r * 1024
            args = [f"f{h}[{2 * r + e}]" for e in range(2)]
            args += [self._value(k, h, r, e) for k in _loaded(self.p) for e in range(2)]
            args += [f"sc{k}" for k in range(len(self.p.scalars))]
            args += [f"obase{k} + {const} + xo" for k in range(len(self.p.outputs))]
            parts = _partial_names(self.p, self.kinds, f"_{h}{r}", "_")
            args += parts + _oks(self.kinds, f"okm_{h}{r}", ["okn_0", "okn_1"])
            call = f"epi_pair({', '.join(args)})"
            out.append(f"{', '.join(parts)}, = {call}" if parts else call)
        parts = self._group_partials("_")
        out.append(f"return {', '.join(parts)}," if parts else "return 0")
        params = ["j"] + [x for x, _ in self._group_params()]
        return ("@cuda.jit(device=True, forceinline=True)\n"
                f"def epi_group({', '.join(params)}):\n" + "\n".join("    " + x for x in out) + "\n")

    def _value(self, k, h, r, e):
        """Input k's value for element e of the group's row (h, r), inside the group function."""
        if k in self.const:
            return f"vc{k}"
        if k in self.bcast:
            return f"vb{k}_{e}"
        if k in self.rowvec:
            return f"vr{k}_{h}{r}"
        if k in self._pair_read():
            return f"xs{k}_{h}{r}_{e}"
        return f"{_SMEM_LOADERS[self.p.inputs[k].dtype]}(abuf{k}, arow + {8 * r * AUX_PITCH + e} + c)"

    def _pair_read(self):
        """Staged fp32 inputs: a row's column pair read by one 64-bit load. With rows AUX_PITCH
        words apart (8 banks further per row), the 16 lanes of a half-warp, rows fg = 0..3 x
        pairs fq = 0..3, cover the 32 banks once: conflict-free."""
        return [k for k in self.staged if self.p.inputs[k].dtype == _PAIR_READ or k in self.ring]

    def _ring_panels(self):
        """aux_ring: the shared address of this thread's row pair, column pair 2 fq of chunk 0 in
        each of its warpgroup's panels (one per 64 columns c) of every ring input: group g =
        wg * panels + c sits in the tile's aux stage g // per_stage (from ring slot s_aux, set
        where the consumer waited for them, mainloop_sm90._aux_ring_wait), input x's panel 8 KB
        x further. A fragment row's y % 8 is fg, so chunk j of its swizzled row is at j ^ fg."""
        lay, out = self.lay, []
        if not self.ring:
            return out
        x_count = len(self.ring)
        for c in range(lay.panels):
            out += [f"ag = wg * {lay.panels} + {c}",
                    f"aq = ag // {lay.aux_per_stage}",
                    "asl = s_aux + aq",
                    f"if asl >= {lay.stages}:",
                    f"    asl = asl - {lay.stages}"]
            out += [f"apan{k}_{c} = sbase + asl * {sm90.stage_bytes(lay.bn)} + (ag - aq * {lay.aux_per_stage}) * "
                    f"{x_count * PANEL_BYTES} + {x * PANEL_BYTES} + (16 * w + fg) * 128 + 4 * fq    # {self.p.inputs[k].name}"
                    for x, k in enumerate(self.ring)]
        return out

    def _group(self, j):
        """The call of the group function for column group j."""
        # i64(j), not j: numba compiles a callee once per literal argument (16 group functions)
        args = [f"i64({j})"] + [x if arg is None else arg(j) for x, arg in self._group_params()]
        parts = self._group_partials(f"_{j}")
        call = f"epi_group({', '.join(args)})"
        return [f"{', '.join(parts)}, = {call}" if parts else call]

    def _combines(self, rows):
        """rows=True: row partials across the quad; False: column partials across the warp's
        quads and then the four warps (scratch), whole-tile partials across everything. Fixed
        orders throughout, so deterministic mode is bit-identical run to run."""
        out, bar = [], "named_bar_sync(1 + wg, 128)"
        for k, (red, kind) in enumerate(zip(self.p.reductions, self.kinds)):
            if (kind == "row") is not rows:
                continue
            gc = lambda v, m, n, red=red, k=k: global_combine(red, self.det, k, v, m, n)  # noqa: E731
            if kind == "row":
                for h, r in self.rows:
                    q = f"q{k}_{h}{r}"
                    out += [f"{q} = {comb(red, q, shfl(q, s))}" for s in (1, 2)]
                    out += [f"if (fq == 0) & okm_{h}{r}:", f"    {gc(q, f'm_{h}{r}', None)}    # {red.name}"]
            elif kind == "col":
                out.append(f"wcol = w * {self.lay.bn} + 2 * fq    # this thread's column pair's scratch word")
                parts = ", ".join(f"p{k}_{j}{e}" for j, e in self.cols)
                out.append(f"epi_col{k}(fg, scratch, wcol, {parts})")
                out.append(bar)
                for _, col in thread_columns(self.lay):     # thread tid finishes column tid (+ 128)
                    total = f"lds(scratch, {col})"
                    for wi in range(1, 4):
                        total = comb(red, total, f"lds(scratch, {wi * self.lay.bn} + {col})")
                    out += [f"a{k} = {total}", f"if n0 + {col} < N:",
                            f"    {gc(f'a{k}', None, f'n0 + {col}')}    # {red.name}"]
                out.append(bar)
            else:
                p = f"p{k}"
                out += [f"{p} = {comb(red, p, shfl(p, s))}" for s in (1, 2, 4, 8, 16)]
                out += ["if tid % 32 == 0:", f"    sts(scratch, w, {p})", bar]
                total = "lds(scratch, 0)"
                for wi in range(1, 4):
                    total = comb(red, total, f"lds(scratch, {wi})")
                out += ["if tid == 0:", f"    {gc(total, None, None)}    # {red.name}", bar]
        return out
