"""Warp-level combines of the fragment epilogue's reductions (epilogue_fragment.py): the fp32
combine a reduction's partials take, an xor shuffle, and the column reduce-scatter device
functions (epi_col<k>)."""
from evt_core.tree.ops import Op

from ...gpu.reductions import reduction_kind


def comb(red, a, b):
    """The kernel's fp32 combine (combine() spells devicefns calls that numba inlines at its IR
    level per call site: too slow to build for a fragment's dozens of combines)."""
    return f"({a} + {b})" if red.op in (Op.SUM, Op.MEAN) else f"max_nan({a}, {b})"


def shfl(v, lanes):
    return f"cuda.shfl_xor_sync(0xFFFFFFFF, {v}, {lanes})"


def column_functions(program, lay):
    """Module-level source of epi_col<k> per column reduction k: the thread's column partials
    (column 8 j + 2 fq + e as partial 2 j + e) combined over the warp's eight quads by a
    reduce-scatter, then parked in the scratch. Each of the three xor levels (4, 8, 16: fg's
    bits) halves what a lane holds: it keeps the half its fg bit names, sends the other half
    to its partner and combines what comes back, so p partials take p/2 + p/4 + p/8 shuffles
    (28 at 128 columns, p = 32) where a shuffle chain per column took 3p (96), and each lane
    ends with p/8 finished columns, which it stores. Every column still combines its quads in
    the order xor 4, 8, 16, each step "own with partner's": sums are the chains' bit for bit
    (fp32 addition commutes exactly), maxima too but for the sign of a zero max_nan picks
    between +0 and -0 by operand order; the order is fixed, so deterministic mode stays
    bit-identical run to run."""
    out = []
    n = 2 * (lay.bn // 8)
    for k, red in enumerate(program.reductions):
        if reduction_kind(red) != "col":
            continue
        names = [f"v{i}" for i in range(n)]
        body = []
        for level, lanes in enumerate((4, 8, 16)):
            half = len(names) // 2
            b = f"b{level}"
            body.append(f"{b} = (fg >> {level}) & 1")
            kept = []
            for i in range(half):
                lo, hi, x = names[i], names[i + half], f"x{level}_{i}"
                body += [f"{x} = select_f32({b}, {hi}, {lo})",
                         f"{x} = {comb(red, x, shfl(f'select_f32({b}, {lo}, {hi})', lanes))}"]
                kept.append(x)
            names = kept
        # the lane keeps partials base + t, t < n/8, base = n/2 b0 + n/4 b1 + n/8 b2 (even), whose
        # columns 8 (i // 2) + 2 fq + i % 2 are wcol + 4 base + 8 (t // 2) + t % 2
        body.append(f"at = wcol + 4 * ({n // 2} * b0 + {n // 4} * b1 + {n // 8} * b2)")
        body += [f"sts(scratch, at + {8 * (t // 2) + t % 2}, {v})" for t, v in enumerate(names)]
        body.append("return 0")
        out.append("@cuda.jit(device=True, forceinline=True)\n"
                   f"def epi_col{k}(fg, scratch, wcol, {', '.join(f'v{i}' for i in range(n))}):    # {red.name}\n" +
                   "\n".join("    " + x for x in body) + "\n")
    return "\n\n".join(out)
