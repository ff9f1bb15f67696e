"""Source of the finishing kernel: fp32 workspaces -> reduction outputs.

One thread per output element per reduction. It combines the element's partial slots in a fixed
order (one slot in atomic mode; one per CTA along each reduced axis in deterministic mode),
divides MEAN by the number of reduced elements, undoes AMIN's negation, and rounds once into
the output dtype at the output's strides.
"""
from evt_core.tree.ops import Op

from .epilogue import combine, identity
from .abi import arg_list, finish_params

_STORERS = {"float32": "st_f32", "float16": "st_f16", "bfloat16": "st_bf16"}
THREADS = 256


def finish_source(program):
    body = ["idx = cuda.grid(1)"]
    for k, red in enumerate(program.reductions):
        kept = {a: a not in red.over for a in "LMN"}
        ext = {a: (a if kept[a] else "1") for a in "LMN"}
        count_reduced = " * ".join(a for a in "LMN" if not kept[a]) or "1"
        body += [
            f"# {red.name}: {red.op.value} over {''.join(sorted(red.over))} -> {red.operand.dtype}",
            f"if idx < {ext['L']} * {ext['M']} * {ext['N']}:",
            f"    n = idx % {ext['N']}",
            f"    m = (idx // {ext['N']}) % {ext['M']}",
            f"    l = idx // ({ext['N']} * {ext['M']})",
            f"    a = {identity(red)}",
            f"    for pl in range(ws{k}_pl):",
            f"        wl = {'pl' if not kept['L'] else 'l'}",
            f"        for pm in range(ws{k}_pm):",
            f"            wm = {'pm' if not kept['M'] else 'm'}",
            f"            for pn in range(ws{k}_pn):",
            f"                wn = {'pn' if not kept['N'] else 'n'}",
            f"                a = {combine(red, 'a', f'ld_f32(ws{k}, (wl * ws{k}_wm + wm) * ws{k}_wn + wn)')}",
        ]
        if red.op is Op.MEAN:
            body.append(f"    a = a / float32({count_reduced})    # mean = fp32 sum / count")
        if red.op is Op.AMIN:
            body.append("    a = -a    # AMIN was carried as AMAX of the negation")
        body.append(f"    {_STORERS[red.operand.dtype]}(red{k}_p, l * red{k}_sl + m * red{k}_sm + n * red{k}_sn, a)")
    params = finish_params(program)
    return f"def evt_finish({arg_list(params)}):\n" + "\n".join("    " + s for s in body) + "\n"
