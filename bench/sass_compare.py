"""Side by side SASS of the numba_cuda and cupy sm_90a kernels of one ladder rung (CPU only).

    python3 -m bench.sass_compare R0,W3,W4 [--schedule auto|pp|coop] [--stages 6] [--dump DIR]

Both kernels are built for the same tree, tile (128 x 128 x 64) and schedule: numba through
codegen/mainloop_sm90.sm90_source (the fragment epilogue with fast_ops, aux_ring where the
cooperative kernel has (M, N) inputs: what select.variant takes at the benchmark shapes);
cupy through codegen/sm90.generate with the Spec decide_spec gives a row-major 8192 x 3072 x
768 call and TileConfig(128, 128, 64, stages, pingpong), compiled by nvcc -arch=sm_90a.
"auto" is ping-pong unless the tree loads an (M, N) input per row (select.sm90_pingpong,
without the tile-count rule).

Per kernel it prints static instruction counts of the consumer's regions (found from the
control flow: the k-loop is the innermost loop holding the HGMMAs, the epilogue runs from its
exit to the tile loop's back edge, the producer's loop holds the UTMALDGs; the watchdog's slow
paths behind the mbarrier waits are left out), and the hand-off path: instructions from the
ping-pong ordering barrier (or the tile loop's head) to the first HGMMA, and from the last
wgmma wait to the barrier arrive that lets the other warpgroup start. The epilogue is fully
unrolled, so its counts are per thread and tile; the k-loop's are per k-block.
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from types import SimpleNamespace

CLASSES = (   # (column, opcode test on the full mnemonic); first match wins
    ("HGMMA", lambda o: o.startswith("HGMMA")),
    ("SHFL", lambda o: o.startswith("SHFL")),
    ("RED/ATOM", lambda o: o.split(".")[0] in ("RED", "REDG", "ATOM", "ATOMG", "ATOMS", "REDUX")),
    ("LDS", lambda o: o.split(".")[0] in ("LDS", "LDSM")),
    ("STS", lambda o: o.split(".")[0] == "STS"),
    ("LDG/STG", lambda o: o.split(".")[0] in ("LDG", "STG", "LD", "ST")),
    ("BAR", lambda o: o.split(".")[0] == "BAR"),
    ("MEMBAR", lambda o: o.split(".")[0] in ("MEMBAR", "FENCE")),
    ("SYNCS", lambda o: o.startswith("SYNCS")),
    ("UTMA", lambda o: o.startswith("UTMA")),
    ("mov/zero", lambda o: o in ("IMAD.MOV", "IMAD.MOV.U32", "IMAD.U32") or
     o.split(".")[0] in ("CS2R", "MOV", "R2UR", "S2R", "S2UR", "LDC")),
    ("int/addr", lambda o: o.split(".")[0] in ("IMAD", "IADD3", "LEA", "LOP3", "SHF", "IABS", "VIADD", "IMNMX",
                                               "VIADDMNMX", "SEL", "SGXT", "BMSK", "POPC", "FLO", "PRMT")),
    ("uniform", lambda o: o.startswith("U")),
    ("setp", lambda o: o.split(".")[0] in ("ISETP", "FSETP", "PLOP3", "P2R", "R2P", "HSETP2")),
    ("FSEL/MNMX", lambda o: o.split(".")[0] in ("FSEL", "FMNMX")),
    ("cvt", lambda o: o.split(".")[0] in ("F2F", "F2FP", "F2I", "I2F", "I2FP", "HADD2", "HMUL2", "HFMA2")),
    ("fp32", lambda o: o.split(".")[0] in ("FMUL", "FADD", "FFMA", "MUFU")),
    ("branch", lambda o: o.split(".")[0] in ("BRA", "BSSY", "BSYNC", "WARPSYNC", "YIELD", "EXIT", "CALL", "NOP",
                                             "VOTE", "VOTEU", "ELECT")),
)
COLUMNS = ("total",) + tuple(c for c, _ in CLASSES) + ("other", "pred.BRA")


# ---- building ----------------------------------------------------------------------------------

def _program(key, mn=(64, 64)):
    import evt_core
    from bench.ladder import LADDER
    wl = LADDER[key]
    return evt_core.trace(wl.epilogue, wl.example(*mn)).program


def schedule(program, wanted):
    """(pingpong, aux_ring) of the numba kernel for `wanted` in auto / pp / coop."""
    from evt_backends.numba_cuda import select
    from evt_backends.numba_cuda.codegen.epilogue_sm90 import tile_inputs
    if wanted == "auto":
        per_row = any(program.spans(t)[1] for t in program.inputs)
        pp = not per_row
    else:
        pp = wanted == "pp"
    ring = not pp and bool(tile_inputs(program)) and select.sm90_aux_ring(program, False)
    return pp, ring


def numba_kernel(key, pp, ring):
    """(SASS text, register count, source) of the numba_cuda kernel."""
    from evt_backends.gpu.fastmath import fast_ops
    from evt_backends.numba_cuda.codegen.mainloop_sm90 import module_prelude, sm90_params, sm90_source
    from evt_backends.numba_cuda.runtime import build as nb
    p = _program(key)
    src = module_prelude("float16", False) + "\n" + sm90_source(
        p, "float16", False, False, False, False, pp, False, True, fast=fast_ops(p), aux_ring=ring)
    built = nb.build(nb.cache_key("sass_compare", key, pp, ring, p.key(), src), src, "evt_kernel",
                     sm90_params(p, True, ring), sm90a=True)
    regs = re.search(r"Used (\d+) registers", built.ptx)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(built.image)
        f.flush()
        sass = subprocess.run([nb._cuobjdump(), "-sass", f.name], capture_output=True, text=True, check=True).stdout
    return sass, int(regs.group(1)) if regs else -1, src


def cupy_kernel(key, pp, stages, M=8192, N=3072, K=768):
    """(SASS text of evt_main, register count, source) of the cupy kernel."""
    import dataclasses

    from bench.nvcc_check import find_tool
    from evt_backends.cupy.backend import CupyBackend
    from evt_backends.cupy.codegen.plan import TileConfig
    from evt_backends.cupy.select import decide_spec, fit_stages, generate
    p = _program(key, (256, 512))

    def frame(op):
        _, sm, sn = p.spans(op)
        return SimpleNamespace(array=SimpleNamespace(ptr=1 << 20), strides=(0, N if sm else 0, 1 if sn else 0))
    reds = [SimpleNamespace(array=SimpleNamespace(ptr=1 << 20),
                            strides=(0, 0 if "M" in r.over else 1, 0 if "N" in r.over else 1)) for r in p.reductions]
    bound = SimpleNamespace(L=1, M=M, N=N, K=K, A=SimpleNamespace(ptr=1 << 20), B=SimpleNamespace(ptr=1 << 20),
                            a_strides=(0, K, 1), b_strides=(0, N, 1), dtype="float16", scalars=[],
                            inputs=[frame(o) for o in p.inputs], outputs=[frame(o) for o in p.outputs], reductions=reds)
    spec = decide_spec(p, bound, dict(CupyBackend.options), (9, 0))
    cfg = fit_stages(p, spec, TileConfig(128, 128, 64, stages=stages, pingpong=pp))
    src = generate(p, spec, dataclasses.replace(cfg))
    with tempfile.TemporaryDirectory() as d:
        cu, cubin = os.path.join(d, "k.cu"), os.path.join(d, "k.cubin")
        with open(cu, "w") as f:
            f.write(src)
        r = subprocess.run([find_tool("nvcc"), "-gencode=arch=compute_90a,code=sm_90a", "-cubin", "-std=c++17",
                            "-Xptxas", "-v", "-diag-suppress", "177,550", "-o", cubin, cu], capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-3000:])
        sass = subprocess.run([find_tool("cuobjdump"), "-sass", "-fun", "evt_main", cubin],
                              capture_output=True, text=True, check=True).stdout
    regs = re.search(r"'evt_main'.*?Used (\d+) registers", r.stderr, re.S)
    return sass, int(regs.group(1)) if regs else -1, src + f"\n// {cfg.label()}\n"


# ---- reading the SASS ----------------------------------------------------------------------------

def instructions(sass):
    """[{addr, pred, op, text}] of the one kernel in `sass` (cuobjdump -sass of one function)."""
    out = []
    for line in sass.splitlines():
        m = re.match(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m:
            text = m.group(2).strip()
            pm = re.match(r"(@!?U?P[T0-9]+)\s+(.*)", text)
            body = pm.group(2) if pm else text
            out.append(dict(addr=int(m.group(1), 16), pred=pm.group(1) if pm else "", op=body.split()[0], text=text))
    return out


def _target(i):
    if i["op"].split(".")[0] in ("BRA", "BSSY"):
        m = re.search(r"0x([0-9a-f]+)\s*$", i["text"])
        return int(m.group(1), 16) if m else None
    return None


def regions(ins):
    """{name: (first addr, last addr)} of the consumer's tile prologue, k-loop and epilogue and
    the producer's k-loop."""
    loops = [(t, i["addr"]) for i in ins if (t := _target(i)) is not None and t <= i["addr"]
             and i["addr"] - t > 0x80 and i["op"].startswith("BRA")]
    span = lambda lp: lp[1] - lp[0]                                            # noqa: E731
    hg = [i["addr"] for i in ins if i["op"].startswith("HGMMA")]
    kloop = min((lp for lp in loops if lp[0] <= hg[0] and hg[-1] <= lp[1]), key=span)
    tile = min((lp for lp in loops if lp[0] < kloop[0] and kloop[1] < lp[1]), key=span)
    tma = [i["addr"] for i in ins if i["op"].startswith("UTMALDG")]
    prod = min((lp for lp in loops if any(lp[0] <= a <= lp[1] for a in tma) and not lp[0] <= kloop[0] <= lp[1]),
               key=span)
    return {"tile prologue": (tile[0], kloop[0] - 1), "k-loop / k-block": kloop,
            "epilogue / tile": (kloop[1] + 1, tile[1]), "producer k-loop": prod}


def slow_paths(ins):
    """The watchdog's code behind each first TRYWAIT's branch (a clock or timer read): not run."""
    out = []
    for a, b in zip(ins, ins[1:]):
        t = _target(b)
        if "TRYWAIT" in a["op"] and b["pred"] and t and t > b["addr"]:
            lo, hi = b["addr"] + 16, t - 16
            if any(lo <= i["addr"] <= hi and ("CLOCK" in i["text"] or "GLOBALTIMER" in i["text"]) for i in ins):
                out.append((lo, hi))
    return out


def count(ins, lo, hi, skip):
    c = collections.Counter()
    for i in ins:
        if lo <= i["addr"] <= hi and not any(a <= i["addr"] <= b for a, b in skip):
            c["total"] += 1
            c[next((name for name, f in CLASSES if f(i["op"])), "other")] += 1
            c["pred.BRA"] += bool(i["pred"] and i["op"].startswith("BRA"))
    return c


def handoff(ins, reg, skip):
    """Executed instructions on the schedule's critical hand-off path (see the module docstring)."""
    (tlo, _), (klo, khi), (_, thi) = reg["tile prologue"], reg["k-loop / k-block"], reg["epilogue / tile"]
    first = next(i["addr"] for i in ins if i["op"].startswith("HGMMA") and klo <= i["addr"])
    n = lambda lo, hi: sum(1 for i in ins if lo <= i["addr"] < hi and not any(a <= i["addr"] <= b for a, b in skip))  # noqa: E731,E501
    order = [i["addr"] for i in ins if i["op"].startswith("BAR.SYNC") and "0x100" in i["text"] and tlo <= i["addr"] < klo]
    wait0 = [i["addr"] for i in ins if i["op"].startswith("WARPGROUP.DEPBAR") and "0x0" in i["text"] and khi < i["addr"] <= thi]
    arrive = [i["addr"] for i in ins if i["op"].startswith("BAR.ARV") and khi < i["addr"] <= thi]
    out = {"tile head -> 1st HGMMA": n(tlo, first),
           "acc zeroing CS2R (static)": sum(1 for i in ins if i["op"] == "CS2R" and "SRZ" in i["text"]
                                            and tlo <= i["addr"] < klo)}
    if order:
        out["order BAR.SYNC -> 1st HGMMA"] = n(order[0], first)
    if wait0 and arrive:
        out["wgmma wait0 -> BAR.ARV"] = n(wait0[0], arrive[0])
    plo, phi = reg["producer k-loop"]        # its k-blocks per trip: the expect_tx arrivals (unrolled copies)
    out["producer k-blocks per loop trip"] = sum(1 for i in ins if plo <= i["addr"] <= phi
                                                 and i["op"] == "SYNCS.ARRIVE.TRANS64")
    return out


def report(name, sass, regs):
    ins = instructions(sass)
    reg, skip = regions(ins), slow_paths(ins)
    rows = {k: count(ins, lo, hi, skip) for k, (lo, hi) in reg.items()}
    return dict(name=name, regs=regs, total=len(ins), rows=rows, handoff=handoff(ins, reg, skip))


def print_reports(reps):
    cols = [c for c in COLUMNS if any(r["rows"][k][c] for r in reps for k in r["rows"])]
    print("| kernel | region | " + " | ".join(cols) + " |")
    print("|---|---|" + "---:|" * len(cols))
    for r in reps:
        for k, c in r["rows"].items():
            print(f"| {r['name']} | {k} | " + " | ".join(str(c[x]) for x in cols) + " |")
    for r in reps:
        print(f"{r['name']}: {r['total']} instructions, {r['regs']} registers at entry; "
              + ", ".join(f"{k} {v}" for k, v in r["handoff"].items()))


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m bench.sass_compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("rungs", help="comma-separated ladder rungs (bench/ladder.py LADDER), e.g. R0,W3,W4")
    ap.add_argument("--schedule", default="auto", choices=("auto", "pp", "coop"))
    ap.add_argument("--stages", type=int, default=6, help="cupy ring slots (fewer where shared memory says so)")
    ap.add_argument("--dump", default="", help="folder for the sources and SASS of every kernel")
    args = ap.parse_args(argv)
    os.environ.setdefault("EVT_CACHE_DIR", tempfile.mkdtemp(prefix="evt-sass-compare-"))
    for key in args.rungs.split(","):
        pp, ring = schedule(_program(key), args.schedule)
        label = f"{key} {'pp' if pp else 'coop'}{' ring' if ring else ''}"
        reps = []
        for be, (sass, regs, src) in (("numba", numba_kernel(key, pp, ring)), ("cupy", cupy_kernel(key, pp, args.stages))):
            if args.dump:
                os.makedirs(args.dump, exist_ok=True)
                stem = os.path.join(args.dump, f"{key}.{be}")
                open(stem + (".py" if be == "numba" else ".cu"), "w").write(src)
                open(stem + ".sass", "w").write(sass)
            reps.append(report(f"{label} {be}", sass, regs))
        print_reports(reps)
        print()


if __name__ == "__main__":
    sys.exit(main())
