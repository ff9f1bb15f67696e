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


def column_group_body(program, fm, smem):
    """Body of one column-group iteration (`n` = first column of the pair must be defined)."""
    nred = max(1, len(program.reductions))
    L = []
    cols = [(r, red) for r, red in enumerate(program.reductions) if reduction_kind(red) == COL]
    for r, red in cols:
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
        elif kind == COL:
            L.append(f"  cp{r}_0 = {_comb(red, f'cp{r}_0', f'red[{r}][0]')}; "
                     f"cp{r}_1 = {_comb(red, f'cp{r}_1', f'red[{r}][1]')};")
        elif kind == ALL:
            L.append(f"  ap{r} = {_comb(red, f'ap{r}', _comb(red, f'red[{r}][0]', f'red[{r}][1]'))};")
    if fm.stage_word:
        L.append(f"  {fm.stage_word}")
    L.append("}")
    for r, red in cols:
        # the 8 quads of the warp hold the same columns for different rows
        off, _ = smem[r]
        for e in (0, 1):
            for mask in (4, 8, 16):
                L.append(f"cp{r}_{e} = {_comb(red, f'cp{r}_{e}', f'evt_shfl_xor(cp{r}_{e}, {mask})')};")
        L.append(f"if ((threadIdx.x & 31) < 4) {{ const u32 cb_ = red_s + 4 * ({off} + ({fm.col_warp_id}) * {fm.tile_cols} "
                 f"+ {fm.col_in_tile}); evt_sts_f32(cb_, cp{r}_0); evt_sts_f32(cb_ + 4, cp{r}_1); }}")
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
    L.append(fm.sync)
    L.extend(after_sync)
    L.append(fm.sync + "  // the buffers are reused by the next tile")
    return "\n".join(L)
