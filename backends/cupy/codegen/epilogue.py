"""Program -> the epilogue as inline device code.

Emits three things every mainloop shares:
  * `EpiArgs`, one by-value struct holding every pointer, stride, extent and scalar (the host
    packs it with `ArgLayout.struct`, so the launch passes one blob instead of dozens of args);
  * `evt_epilogue(...)`, the straight-line Program body for one PAIR of adjacent columns
    (n, n+1) of row m in batch l: both tensor-core fragment layouts hand each thread column
    pairs, so pair-wide loads and stores come for free when the layout allows;
  * `evt_red<r>_put(...)`, the one global combine per CTA (atomic, or a partial slot in
    deterministic mode) of reduction r.
"""
import struct
from dataclasses import dataclass

from evt_core.tree.ops import Op

from .plan import (ALL, COL, ELEM, N_BROADCAST, N_GENERIC, N_UNIT, N_UNIT_PAIR, REDUCE_OPS, ROW, VEC_ROW,
                   reduction_kind, tile_vectors, tma_outputs)
from .prelude import STORAGE
from .spelling import REDUCE_SPELLING, float_literal, spell


@dataclass(frozen=True)
class ArgLayout:
    """Field order of EpiArgs: 8-byte fields first, then 4-byte ones, so C and `struct` agree
    on every offset without padding rules."""
    fields: tuple        # (c_decl, struct_code)

    @property
    def struct(self):
        fmt = "<" + "".join(code for _, code in self.fields)
        return struct.Struct(fmt)

    def c_struct(self):
        body = "\n".join(f"  {decl};" for decl, _ in self.fields)
        return f"struct __align__(8) EpiArgs {{\n{body}\n}};\n"


def arg_layout(program, dtype):
    """The EpiArgs fields of `program` (see runtime/launcher.py for the values, in this order)."""
    ab = STORAGE[dtype]
    f8 = [(f"const {ab}* A", "Q"), (f"const {ab}* B", "Q")]
    f8 += [(f"long long {n}", "q") for n in ("a_sL", "a_sM", "a_sK", "b_sL", "b_sK", "b_sN")]
    for i, op in enumerate(program.inputs):
        f8 += [(f"const {STORAGE[op.dtype]}* in{i}", "Q")] + [(f"long long in{i}_s{ax}", "q") for ax in "LMN"]
    for i, op in enumerate(program.outputs):
        f8 += [(f"{STORAGE[op.dtype]}* out{i}", "Q")] + [(f"long long out{i}_s{ax}", "q") for ax in "LMN"]
    for r, red in enumerate(program.reductions):
        f8 += [(f"float* ws{r}", "Q"), (f"{STORAGE[red.operand.dtype]}* rout{r}", "Q")]
        f8 += [(f"long long rout{r}_s{ax}", "q") for ax in "LMN"]
    f4 = [(f"int {n}", "i") for n in ("L", "M", "N", "K", "mtiles", "ntiles", "tiles", "mblk", "nblk")]
    f4 += [(f"float sc{i}", "f") for i in range(len(program.scalars))]
    for r in range(len(program.reductions)):
        f4 += [(f"float count{r}", "f"), (f"int parts{r}", "i")]
    if len(f4) % 2:
        f4.append(("int pad_", "i"))
    return ArgLayout(tuple(f8 + f4))


def _offset(prefix, spans, skip_n=True):
    """C expression of the (l, m) part of an element offset; axes a tensor does not span add
    nothing (their stride is 0 by construction)."""
    terms = [f"(long long){c} * a.{prefix}_s{ax}" for ax, c, s in zip("LM", "lm", spans[:2]) if s]
    return " + ".join(terms) or "0LL"


class EpilogueWriter:
    """Writes the body of evt_epilogue for one Program and Spec. aux_words: the aux_tma inputs
    come in as the pair's 32-bit words (aux_w<x>, read earlier by the caller), not as an address
    into their shared-memory panels."""

    def __init__(self, program, spec, aux_words=False):
        self.p, self.spec, self.aux_words = program, spec, aux_words
        self.lines = []

    def emit(self, text):
        self.lines.append("  " + text)

    def write(self):
        p = self.p
        for i, ins in enumerate(p.instrs):
            self.emit(f"// %{i} = {_describe(p, ins)}")
            getattr(self, f"_{_handler(ins.op)}")(i, ins)
        return "\n".join(self.lines)

    # ---- leaves ----
    def _accum(self, i, ins):
        self.emit(f"const float v{i}_0 = acc0, v{i}_1 = acc1;")

    def _scalar(self, i, ins):
        self.emit(f"const float v{i}_0 = a.sc{ins.arg}, v{i}_1 = v{i}_0;")

    def _const(self, i, ins):
        self.emit(f"const float v{i}_0 = {float_literal(ins.arg)}, v{i}_1 = v{i}_0;")

    def _load(self, i, ins):
        k = ins.arg
        op = self.p.inputs[k]
        dt, cls = op.dtype, self.spec.in_classes[k]
        base = f"a.in{k} + ({_offset(f'in{k}', self.p.spans(op))})"
        if k in self.spec.aux_tma:
            # aux_tma: the producer TMA-loaded this tile of the input into 128B-swizzled shared
            # memory; aux_s is the shared-space address of this thread's (row, column pair) word in input 0's panels. Cells
            # past the edges were zero-filled, and nothing outside the problem is stored.
            x = self.spec.aux_tma.index(k)
            self.emit(f"float v{i}_0, v{i}_1;")
            word = f"aux_w{x}" if self.aux_words else f"evt_lds_u32(aux_s + {x} * aux_stride)"
            self.emit(f"evt_unpack2_{dt}({word}, v{i}_0, v{i}_1);")
            return
        tv = tile_vectors(self.p, self.spec)
        if k in tv:
            # a broadcast vector staged for this tile in shared memory (zero past the edges);
            # vs = the warpgroup's vector buffer, tn/tm = the pair's column / the row in its tile
            kind, boff = tv[k]
            cvt = {"float16": "evt_f16_to_f32", "bfloat16": "evt_bf16_to_f32"}.get(dt)
            self.emit(f"float v{i}_0, v{i}_1;")
            if kind == VEC_ROW and cvt:
                self.emit(f"evt_unpack2_{dt}(evt_lds_u32(vs + {boff} + 2 * tn), v{i}_0, v{i}_1);")
            elif kind == VEC_ROW:
                self.emit(f"evt_lds_f32x2(vs + {boff} + 4 * tn, v{i}_0, v{i}_1);")
            elif cvt:
                self.emit(f"v{i}_0 = {cvt}(evt_lds_u16(vs + {boff} + 2 * tm)); v{i}_1 = v{i}_0;")
            else:
                self.emit(f"v{i}_0 = evt_lds_f32(vs + {boff} + 4 * tm); v{i}_1 = v{i}_0;")
            return
        self.emit(f"float v{i}_0 = 0.0f, v{i}_1 = 0.0f;")
        if cls == N_BROADCAST:
            self.emit(f"if (ok0) {{ v{i}_0 = evt_ld_{dt}({base}); v{i}_1 = v{i}_0; }}")
        elif cls == N_UNIT_PAIR:
            self.emit(f"if (ok1) evt_ld2_{dt}({base} + n, v{i}_0, v{i}_1);")
            self.emit(f"else if (ok0) v{i}_0 = evt_ld_{dt}({base} + n);")
        elif cls == N_UNIT:
            self.emit(f"if (ok0) v{i}_0 = evt_ld_{dt}({base} + n);")
            self.emit(f"if (ok1) v{i}_1 = evt_ld_{dt}({base} + n + 1);")
        else:
            assert cls == N_GENERIC
            self.emit(f"if (ok0) v{i}_0 = evt_ld_{dt}({base} + (long long)n * a.in{k}_sN);")
            self.emit(f"if (ok1) v{i}_1 = evt_ld_{dt}({base} + (long long)(n + 1) * a.in{k}_sN);")

    # ---- compute ----
    def _compute(self, i, ins):
        for e in (0, 1):
            expr = spell(ins.op, [f"v{a}_{e}" for a in ins.args], fast=self.spec.fast_math or i in self.spec.fast_ops)
            self.emit(f"const float v{i}_{e} = {expr};")

    # ---- sinks ----
    def _store(self, i, ins):
        k = ins.arg
        op = self.p.outputs[k]
        src = ins.args[0]
        self.emit(f"const float v{i}_0 = v{src}_0, v{i}_1 = v{src}_1;")
        if k in tma_outputs(self.spec):
            pack = "evt_pack_f16x2" if op.dtype == "float16" else "evt_pack_bf16x2"
            o = tma_outputs(self.spec).index(k)
            self.emit(f"tma_word[{o}] = {pack}(v{i}_0, v{i}_1);  // staged in shared memory, stored by TMA")
            return
        dt, cls = op.dtype, self.spec.out_classes[k]
        sL, sM, sN = self.p.spans(op)
        # an output that does not span an axis is written only at coordinate 0 of that axis
        guard = "".join(f" && {c} == 0" for c, s in (("l", sL), ("m", sM)) if not s)
        base = f"a.out{k} + ({_offset(f'out{k}', (sL, sM, sN))})"
        if cls == N_BROADCAST:
            self.emit(f"if (ok0 && n == 0{guard}) evt_st_{dt}({base}, v{i}_0);")
        elif cls == N_UNIT_PAIR:
            self.emit(f"if (ok1{guard}) evt_st2_{dt}({base} + n, v{i}_0, v{i}_1);")
            self.emit(f"else if (ok0{guard}) evt_st_{dt}({base} + n, v{i}_0);")
        elif cls == N_UNIT:
            self.emit(f"if (ok0{guard}) evt_st_{dt}({base} + n, v{i}_0);")
            self.emit(f"if (ok1{guard}) evt_st_{dt}({base} + n + 1, v{i}_1);")
        else:
            self.emit(f"if (ok0{guard}) evt_st_{dt}({base} + (long long)n * a.out{k}_sN, v{i}_0);")
            self.emit(f"if (ok1{guard}) evt_st_{dt}({base} + (long long)(n + 1) * a.out{k}_sN, v{i}_1);")

    def _reduce(self, i, ins):
        r = ins.arg
        red = self.p.reductions[r]
        src = ins.args[0]
        if reduction_kind(red) == ELEM:
            # no M/N axis removed: every element is its own CTA partial
            self.emit(f"if (ok0) evt_red{r}_put(a, l, m, n, 0, 0, v{src}_0);")
            self.emit(f"if (ok1) evt_red{r}_put(a, l, m, n + 1, 0, 0, v{src}_1);")
            return
        ident = REDUCE_SPELLING[red.op][1]
        self.emit(f"red[{r}][0] = ok0 ? v{src}_0 : {ident}; red[{r}][1] = ok1 ? v{src}_1 : {ident};")


def _handler(op):
    if op in (Op.ACCUM, Op.SCALAR, Op.CONST, Op.LOAD, Op.STORE):
        return op.value
    if op in REDUCE_OPS:
        return "reduce"
    return "compute"


def _describe(p, ins):
    args = ", ".join(f"%{a}" for a in ins.args)
    if ins.op is Op.LOAD:
        o = p.inputs[ins.arg]; tail = f" {o.name}: {o.dtype} dims={o.dims}"
    elif ins.op is Op.SCALAR:
        tail = f" {p.scalars[ins.arg]}"
    elif ins.op is Op.CONST:
        tail = f" {ins.arg!r}"
    elif ins.op is Op.STORE:
        o = p.outputs[ins.arg]; tail = f" -> {o.name}: {o.dtype} dims={o.dims}"
    elif ins.op in REDUCE_OPS:
        r = p.reductions[ins.arg]; tail = f" -> {r.name}: {r.operand.dtype} over {''.join(sorted(r.over))}"
    else:
        tail = ""
    return f"{ins.op.value}({args}){tail}".replace("*/", "* /")


def epilogue_function(program, spec, aux_words=False):
    """The device function computing the whole Program for one column pair (aux_words:
    EpilogueWriter's)."""
    nred = max(1, len(program.reductions))
    ntma = max(1, len(tma_outputs(spec)))
    body = EpilogueWriter(program, spec, aux_words).write()
    aux = ", u32 aux_s, u32 aux_stride" if spec.aux_tma else ""
    if spec.aux_tma and aux_words:
        aux = "".join(f", u32 aux_w{x}" for x in range(len(spec.aux_tma)))
    if tile_vectors(program, spec):
        aux += ", u32 vs, int tn, int tm"
    return (
        "// The fused epilogue for the column pair (n, n+1) of row m in batch l. ok0/ok1 say\n"
        "// whether each element lies inside the problem; red[r] receives the values reduction r\n"
        "// combines (its identity outside the problem); tma_word[o] the packed TMA-stored outputs;\n"
        "// aux_s/aux_stride (aux_tma) address the TMA-loaded input tiles in shared memory; vs/tn/tm\n"
        "// the tile's broadcast vectors staged in shared memory (sm90).\n"
        "__device__ __forceinline__ void evt_epilogue(const EpiArgs& a, int l, int m, int n, float acc0,\n"
        f"    float acc1, bool ok0, bool ok1, float (&red)[{nred}][2], u32 (&tma_word)[{ntma}]{aux}) {{\n{body}\n}}\n")


def _kept(red):
    return tuple(ax not in red.over for ax in "LMN")


def _flat(red):
    """C expression of the flat index of (l, m, n) among the reduction's kept coordinates."""
    kl, km, kn = _kept(red)
    return (f"((long long)({'l' if kl else '0'}) * {'a.M' if km else '1'} + {'m' if km else '0'}) * "
            f"{'a.N' if kn else '1'} + {'n' if kn else '0'}")


def _elements(red):
    kl, km, kn = _kept(red)
    return f"((long long){'a.L' if kl else '1'} * {'a.M' if km else '1'} * {'a.N' if kn else '1'})"


def _part(red):
    """C expression of the deterministic partial slot from (l, rb, cb): batches (when L is
    reduced) x row blocks (when M is) x column blocks (when N is), in that order."""
    pl = "l" if "L" in red.over else "0"
    kind = reduction_kind(red)
    return {ROW: f"{pl} * a.nblk + cb", COL: f"{pl} * a.mblk + rb",
            ALL: f"({pl} * a.mblk + rb) * a.nblk + cb", ELEM: pl}[kind]


def put_functions(program, deterministic):
    """evt_red<r>_put(a, l, m, n, rb, cb, v): combine a CTA's partial v into the workspace."""
    out = []
    for r, red in enumerate(program.reductions):
        op = {Op.SUM: "sum", Op.MEAN: "sum", Op.AMAX: "amax", Op.AMIN: "amin"}[red.op]
        if deterministic:
            # a consumer warpgroup wholly below the last row has no slot (and only identities)
            body = (f"if (rb < a.mblk) a.ws{r}[(long long)({_part(red)}) * {_elements(red)} + {_flat(red)}] = v;")
        else:
            body = f"evt_atomic_{op}(a.ws{r} + {_flat(red)}, v);"
        out.append(f"// reduction {r}: {red.name} = {red.op.value} over {''.join(sorted(red.over))}\n"
                   f"__device__ __forceinline__ void evt_red{r}_put(const EpiArgs& a, int l, int m, int n, int rb, "
                   f"int cb, float v) {{\n  {body}\n}}\n")
    return "\n".join(out)


def finish_kernels(program, deterministic, direct=()):
    """evt_init (identity fill of the atomic workspace) and evt_finish (partials -> output:
    combine in fixed order, MEAN's division, rounding, the user's strides). A `direct`
    reduction's workspace is its output itself: init fills it, finish leaves it alone."""
    init, fin = [], []
    for r, red in enumerate(program.reductions):
        comb, ident = REDUCE_SPELLING[red.op]
        kl, km, kn = _kept(red)
        E = _elements(red)
        init.append(f"  for (long long i = i0; i < {E}; i += step) a.ws{r}[i] = {ident};")
        if r in direct:
            fin.append(f"  // {red.name}: combined directly into the output by the main kernel")
            continue
        if deterministic:
            gather = (f"float v = {ident};\n      for (int p = 0; p < a.parts{r}; ++p) "
                      f"v = {comb.format(x='v', y=f'a.ws{r}[(long long)p * E + i]')};")
        else:
            gather = f"float v = a.ws{r}[i];"
        mean = f"\n      v = v / a.count{r};" if red.op is Op.MEAN else ""
        dt = red.operand.dtype
        fin.append(
            f"  {{ // {red.name}: {red.op.value} over {''.join(sorted(red.over))}\n"
            f"    const long long E = {E};\n"
            f"    for (long long i = i0; i < E; i += step) {{\n"
            f"      {gather}{mean}\n"
            f"      long long nk = {'i % a.N' if kn else '0'}, rest = {'i / a.N' if kn else 'i'};\n"
            f"      long long mk = {'rest % a.M' if km else '0'}, lk = {'rest / a.M' if km else 'rest'};\n"
            f"      evt_st_{dt}(a.rout{r} + lk * a.rout{r}_sL + mk * a.rout{r}_sM + nk * a.rout{r}_sN, v);\n"
            f"    }}\n  }}")
    head = ("  const long long i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            "  const long long step = (long long)gridDim.x * blockDim.x;\n")
    return (f"extern \"C\" __global__ void evt_init(const __grid_constant__ EpiArgs a) {{\n{head}"
            + "\n".join(init) + "\n}\n"
            f"extern \"C\" __global__ void evt_finish(const __grid_constant__ EpiArgs a) {{\n{head}"
            + "\n".join(fin) + "\n}\n")
