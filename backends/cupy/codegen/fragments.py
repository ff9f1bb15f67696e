"""The epilogue driver shared by both mainloops: walks a thread's accumulator fragment, calls
evt_epilogue per column pair, and reduces.

Both mma.sync (m16n8) and wgmma (m64nN) fragments give lane `lane` the column pair
2*(lane%4) of every 8-column group and the rows lane/4 (+8): a row is spread over the 4 lanes
of a quad, a column over the 8 quads of a warp. So reductions go: registers (over the thread's
own elements) -> xor shuffles (1,2 for rows; 4,8,16 for columns) -> shared memory across warps
-> one global combine per CTA (or per consumer warpgroup) and output element.

A mainloop describes its fragment with `FragmentMap`; everything else here is common.
"""
from dataclasses import dataclass
from typing import Callable

from .plan import ALL, COL, ROW, reduction_kind
from .spelling import REDUCE_SPELLING


@dataclass(frozen=True)
class FragmentMap:
    slots: int                      # rows per thread ("row slots")
    slot_row: Callable              # slot C expr -> absolute row m
    slot_row_in_block: Callable     # slot C expr -> row within the reduction row block
    slot_acc: Callable              # (slot expr, element 0/1) -> accumulator register expr (inside the column loop)
    col_var: str                    # the column-group loop variable
    col_in_tile: str                # C expr: first column of the pair within the tile
    n0: str                         # C expr: first column of the tile
    m0_block: str                   # C expr: first row of the reduction row block
    rb: str                         # C expr: row block index (deterministic slots)
    cb: str                         # C expr: column block index
    tile_cols: int                  # BN
    rows_per_block: int             # RB
    row_warps: int                  # warps sharing one row (their partials meet in smem)
    row_warp_id: str
    col_warps: int                  # warps sharing one column
    col_warp_id: str
    group_threads: int              # threads taking part in the shared-memory combine
    group_tid: str
    group_warp: str                 # warp index inside the combine group
    group_warps: int
    sync: str                       # C statement: barrier over the combine group
    stage_word: str = ""            # C statement consuming tma_word[] (TMA-stored outputs), or ""
    tma_words: int = 1              # length of tma_word[] (TMA-stored outputs, at least 1)
    aux_args: str = ""              # extra evt_epilogue arguments (", aux_s, aux_stride") with aux_tma


def _comb(red, x, y):
    return REDUCE_SPELLING[red.op][0].format(x=x, y=y)


def _ident(red):
    return REDUCE_SPELLING[red.op][1]


def smem_floats(program, fm):
    """{reduction index: (offset, floats)} of the shared-memory combine buffers, and the total."""
    layout, off = {}, 0
    for r, red in enumerate(program.reductions):
        kind = reduction_kind(red)
        size = {ROW: fm.row_warps * fm.rows_per_block if fm.row_warps > 1 else 0,
                COL: fm.col_warps * fm.tile_cols, ALL: fm.group_warps}.get(kind, 0)
        if size:
            layout[r] = (off, size)
            off += size
    return layout, off


def declare_partials(program, fm):
    lines = []
    for r, red in enumerate(program.reductions):
        kind = reduction_kind(red)
        if kind == ROW:
            lines.append(f"float rp{r}[{fm.slots}];")
            lines.append(f"#pragma unroll\nfor (int s = 0; s < {fm.slots}; ++s) rp{r}[s] = {_ident(red)};")
        elif kind == ALL:
            lines.append(f"float ap{r} = {_ident(red)};")
    return "\n".join(lines)


def column_group_body(program, fm, smem, group=None):
    """Body of one column-group iteration (`n` = first column of the pair must be defined).
    group = the C name of the pair index inside a run of column pairs bracketed by
    col_run_begin / col_run_end: column partials then accumulate in registers over the run and
    are reduced across the warp once per run (a halving butterfly) instead of once per pair."""
    nred = max(1, len(program.reductions))
    L = []
    cols = [(r, red) for r, red in enumerate(program.reductions) if reduction_kind(red) == COL]
    for r, red in cols if group is None else ():
        L.append(f"float cp{r}_0 = {_ident(red)}, cp{r}_1 = {_ident(red)};")
    L.append(f"#pragma unroll\nfor (int s = 0; s < {fm.slots}; ++s) {{")
    L.append(f"  const int m = {fm.slot_row('s')};")
    L.append(f"  float red[{nred}][2]; u32 tma_word[{fm.tma_words}] = {{}};")
    L.append(f"  evt_epilogue(a, l, m, n, {fm.slot_acc('s', 0)}, {fm.slot_acc('s', 1)}, "
             f"m < a.M && n < a.N, m < a.M && n + 1 < a.N, red, tma_word{fm.aux_args});")
    for r, red in enumerate(program.reductions):
        kind = reduction_kind(red)
        if kind == ROW:
            L.append(f"  rp{r}[s] = {_comb(red, f'rp{r}[s]', _comb(red, f'red[{r}][0]', f'red[{r}][1]'))};")
        elif kind == COL and group is not None:
            for e in (0, 1):
                a = f"cpa{r}[2 * ({group}) + {e}]"
                L.append(f"  {a} = {_comb(red, a, f'red[{r}][{e}]')};")
        elif kind == COL:
            L.append(f"  cp{r}_0 = {_comb(red, f'cp{r}_0', f'red[{r}][0]')}; "
                     f"cp{r}_1 = {_comb(red, f'cp{r}_1', f'red[{r}][1]')};")
        elif kind == ALL:
            L.append(f"  ap{r} = {_comb(red, f'ap{r}', _comb(red, f'red[{r}][0]', f'red[{r}][1]'))};")
    if fm.stage_word:
        L.append(f"  {fm.stage_word}")
    L.append("}")
    for r, red in cols if group is None else ():
        # the 8 quads of the warp hold the same columns for different rows
        off, _ = smem[r]
        for e in (0, 1):
            for mask in (4, 8, 16):
                L.append(f"cp{r}_{e} = {_comb(red, f'cp{r}_{e}', f'evt_shfl_xor(cp{r}_{e}, {mask})')};")
        L.append(f"if ((threadIdx.x & 31) < 4) {{ const u32 cb_ = red_s + 4 * ({off} + ({fm.col_warp_id}) * {fm.tile_cols} "
                 f"+ {fm.col_in_tile}); evt_sts_f32(cb_, cp{r}_0); evt_sts_f32(cb_ + 4, cp{r}_1); }}")
    return "\n".join(L)


def col_run_begin(program, pairs):
    """Before a run of `pairs` column pairs: the registers of each column reduction's partials."""
    L = []
    for r, red in enumerate(program.reductions):
        if reduction_kind(red) == COL:
            L.append(f"float cpa{r}[{2 * pairs}];\n#pragma unroll\n"
                     f"for (int i = 0; i < {2 * pairs}; ++i) cpa{r}[i] = {_ident(red)};")
    return "\n".join(L)


def col_run_end(program, fm, smem, pairs, j0):
    """After the run (pairs j0 .. j0 + pairs - 1): reduce each column partial over the warp's 8
    quads (lanes with equal lane % 4) with a halving butterfly: at each xor step (16, 8, 4) a
    lane keeps half of its values, sends the other half and adds what its partner sends, so
    2P values cost P + P/2 + P/4 shuffles instead of 6P, and every lane ends with 2P/8 column
    totals of its warp, stored to the warp's row of the combine buffer."""
    V = 2 * pairs
    assert V >= 8 and V & (V - 1) == 0, pairs
    L = []
    for r, red in enumerate(program.reductions):
        if reduction_kind(red) != COL:
            continue
        off, _ = smem[r]
        a = f"cpa{r}"
        L.append("{")
        h = V
        for bit, mask in ((4, 16), (3, 8), (2, 4)):
            h //= 2
            # no divergence around the shuffles: selects pick the kept and the sent half
            L.append(f"  {{ const bool up = (threadIdx.x >> {bit}) & 1;")
            for i in range(h):
                keep, send = f"(up ? {a}[{h + i}] : {a}[{i}])", f"(up ? {a}[{i}] : {a}[{h + i}])"
                L.append(f"    {a}[{i}] = {_comb(red, keep, f'evt_shfl_xor({send}, {mask})')};")
            L.append("  }")
        L.append(f"  const int vi = ((threadIdx.x >> 4) & 1) * {V // 2} + ((threadIdx.x >> 3) & 1) * {V // 4} "
                 f"+ ((threadIdx.x >> 2) & 1) * {V // 8};   // first value index this lane now holds")
        L.append(f"  const u32 cb_ = red_s + 4 * ({off} + ({fm.col_warp_id}) * {fm.tile_cols} + 2 * (threadIdx.x & 3));")
        L.append(f"  #pragma unroll\n  for (int k = 0; k < {V // 8}; ++k) "
                 f"evt_sts_f32(cb_ + 4 * (8 * (({j0}) + ((vi + k) >> 1)) + ((vi + k) & 1)), {a}[k]);")
        L.append("}")
    return "\n".join(L)


def combine(program, fm, smem):
    """After every column group: quad/warp shuffles, the shared-memory combine, one global put."""
    if not any(reduction_kind(r) in (ROW, COL, ALL) for r in program.reductions):
        return ""
    L, after_sync = [], []
    for r, red in enumerate(program.reductions):
        kind = reduction_kind(red)
        if kind == ROW:
            L.append(f"#pragma unroll\nfor (int s = 0; s < {fm.slots}; ++s) {{")
            L.append(f"  float v = rp{r}[s];")
            for mask in (1, 2):
                L.append(f"  v = {_comb(red, 'v', f'evt_shfl_xor(v, {mask})')};")
            if fm.row_warps == 1:
                L.append(f"  const int m = {fm.slot_row('s')};")
                L.append(f"  if ((threadIdx.x & 3) == 0 && m < a.M) evt_red{r}_put(a, l, m, 0, {fm.rb}, {fm.cb}, v);")
            else:
                off, _ = smem[r]
                L.append(f"  if ((threadIdx.x & 3) == 0) evt_sts_f32(red_s + 4 * ({off} + ({fm.row_warp_id}) * {fm.rows_per_block} + "
                         f"{fm.slot_row_in_block('s')}), v);")
                after_sync.append(
                    f"for (int i = {fm.group_tid}; i < {fm.rows_per_block}; i += {fm.group_threads}) {{\n"
                    f"  float v = evt_lds_f32(red_s + 4 * ({off} + i));\n"
                    f"  for (int w = 1; w < {fm.row_warps}; ++w) v = {_comb(red, 'v', f'evt_lds_f32(red_s + 4 * ({off} + w * {fm.rows_per_block} + i))')};\n"
                    f"  const int m = {fm.m0_block} + i;\n"
                    f"  if (m < a.M) evt_red{r}_put(a, l, m, 0, {fm.rb}, {fm.cb}, v);\n}}")
            L.append("}")
        elif kind == COL:
            off, _ = smem[r]
            after_sync.append(
                f"for (int i = {fm.group_tid}; i < {fm.tile_cols}; i += {fm.group_threads}) {{\n"
                f"  float v = evt_lds_f32(red_s + 4 * ({off} + i));\n"
                f"  for (int w = 1; w < {fm.col_warps}; ++w) v = {_comb(red, 'v', f'evt_lds_f32(red_s + 4 * ({off} + w * {fm.tile_cols} + i))')};\n"
                f"  const int n = {fm.n0} + i;\n"
                f"  if (n < a.N) evt_red{r}_put(a, l, 0, n, {fm.rb}, {fm.cb}, v);\n}}")
        elif kind == ALL:
            off, _ = smem[r]
            L.append(f"{{ float v = ap{r};")
            for mask in (1, 2, 4, 8, 16):
                L.append(f"  v = {_comb(red, 'v', f'evt_shfl_xor(v, {mask})')};")
            L.append(f"  if ((threadIdx.x & 31) == 0) evt_sts_f32(red_s + 4 * ({off} + {fm.group_warp}), v); }}")
            after_sync.append(
                f"if ({fm.group_tid} == 0) {{\n  float v = evt_lds_f32(red_s + 4 * ({off}));\n"
                f"  for (int w = 1; w < {fm.group_warps}; ++w) v = {_comb(red, 'v', f'evt_lds_f32(red_s + 4 * ({off} + w))')};\n"
                f"  evt_red{r}_put(a, l, 0, 0, {fm.rb}, {fm.cb}, v);\n}}")
    if after_sync:       # row totals owned by one warp go straight to global: no barrier needed
        L.append(fm.sync)
        L.extend(after_sync)
        L.append(fm.sync + "  // the buffers are reused by the next tile")
    return "\n".join(L)
