"""The epilogue ladder: what each epilogue node costs on top of the bare GEMM, against cuBLAS.

    python3 -m bench.ladder [--out bench/out/ladder] [--quick] [--backends cupy,cupy:fast_math=False]
                            [--shapes 8192x3072x768,...] [--rungs R0,R1,W1] [--rounds 5] [--eager]
    python3 -m bench.ladder --cpu --shapes 64x128x32 --out /tmp/ladder   # no GPU: checks only, no timing

Each rung adds one thing to D = A@B (a bias row, an accurate tanh, a second output, an (M, N)
input, a reduction); W1-W4 are bench/workloads.py's. Every candidate (cuBLAS, the evt backends,
the library anchors that compute the same epilogue) is checked against an fp32 reference first
(outputs NaN-poisoned); then all are timed in one interleaved run with bench.run's machinery.
Library anchors that are not installed are reported as "unavailable: reason".

Writes into --out: results.json (raw per-round times, bench.run's schema), RESULTS.md (the
bench.run table) and LADDER.md (one row per rung and shape: µs, ratio to cuBLAS, TFLOP/s).
"""
import argparse
import datetime
import os
import shlex
import sys
import time
import traceback

import numpy as np

from evt_core import ops

from .workloads import SHAPES, WORKLOADS, Workload, _gelu_tanh_np, parse_shape

F16, F32 = "float16", "float32"


# --- the rungs: one epilogue node each, on top of D = A@B -------------------------------------

def _identity(accum):
    D = accum
    return D


def _bias(accum, bias):
    D = accum + bias
    return D


def _bias_gelu(accum, bias):
    D = ops.gelu_tanh(accum + bias)
    return D


def _two_outputs(accum):
    z = accum
    z1 = accum + 1.0
    return z, z1


def _three_outputs(accum):
    z = accum
    z1 = accum + 1.0
    z2 = accum * 2.0
    return z, z1, z2


def _residual(accum, r):
    D = accum + r
    return D


def _row_sum(accum):
    D = accum
    rs = ops.sum(accum, over="N")
    return D, rs


def _col_sum(accum):
    D = accum
    cs = ops.sum(accum, over="M")
    return D, cs


def _row_max(accum):
    D = accum
    rm = ops.amax(accum, over="N")
    return D, rm


def _bert_ffn_forward(accum, bias):
    z = accum + bias
    act = ops.gelu(z)
    return z, act


def _bert_gelu_backward(accum, z):
    dz = accum * ops.gelu_grad(z)
    dbias = ops.sum(dz, over="M")
    return dz, dbias


_SQRT_HALF = np.float64(0.7071067811865476)


def _np_phi(x):
    from evt_core.tree.ops import erf
    return 0.5 * (1.0 + erf(x.astype(np.float64) * _SQRT_HALF))


def _np_gelu(x):
    return (x * _np_phi(x)).astype(np.float32)


def _np_gelu_grad(x):
    x64 = x.astype(np.float64)
    return (_np_phi(x) + x64 * np.exp(-0.5 * x64 * x64) / np.sqrt(2 * np.pi)).astype(np.float32)


def _t_gelu_erf_backward(acc, z):
    import torch
    return torch.ops.aten.gelu_backward(acc, z, approximate="none")


def _t_gelu(x):
    import torch.nn.functional as F
    return F.gelu(x, approximate="tanh")


def _f32(x):
    import torch
    return x.to(torch.float32)


RUNGS = {w.key: w for w in (
    Workload("R0", "D = acc", _identity, lambda acc: {"D": acc}, lambda acc: {"D": acc},
             aux={}, outputs={"D": ("MN", F16)}),
    Workload("R1", "D = acc + bias[N]", _bias, lambda acc, bias: {"D": acc + bias},
             lambda acc, bias: {"D": acc + bias}, aux={"bias": ("N", F16)}, outputs={"D": ("MN", F16)}),
    Workload("R2", "D = gelu_tanh(acc + bias[N])", _bias_gelu, lambda acc, bias: {"D": _t_gelu(acc + bias)},
             lambda acc, bias: {"D": _gelu_tanh_np(acc + bias)}, aux={"bias": ("N", F16)},
             outputs={"D": ("MN", F16)}),
    Workload("R3", "two 16-bit outputs: z = acc, z + 1", _two_outputs,
             lambda acc: {"z": acc, "z1": acc + 1.0}, lambda acc: {"z": acc, "z1": acc + 1.0},
             aux={}, outputs={"z": ("MN", F16), "z1": ("MN", F16)}),
    Workload("R4", "three 16-bit outputs: z, z + 1, 2z", _three_outputs,
             lambda acc: {"z": acc, "z1": acc + 1.0, "z2": acc * 2.0},
             lambda acc: {"z": acc, "z1": acc + 1.0, "z2": acc * 2.0},
             aux={}, outputs={"z": ("MN", F16), "z1": ("MN", F16), "z2": ("MN", F16)}),
    Workload("R5", "D = acc + r[M, N]", _residual, lambda acc, r: {"D": acc + r}, lambda acc, r: {"D": acc + r},
             aux={"r": ("MN", F16)}, outputs={"D": ("MN", F16)}),
    Workload("R6", "D = acc; row sum over N", _row_sum,
             lambda acc: {"D": acc, "rs": _f32(acc).sum(dim=-1)}, lambda acc: {"D": acc, "rs": acc.sum(axis=-1)},
             aux={}, outputs={"D": ("MN", F16), "rs": ("M", F32)}),
    Workload("R7", "D = acc; column sum over M", _col_sum,
             lambda acc: {"D": acc, "cs": _f32(acc).sum(dim=-2)}, lambda acc: {"D": acc, "cs": acc.sum(axis=-2)},
             aux={}, outputs={"D": ("MN", F16), "cs": ("N", F32)}),
    Workload("R8", "D = acc; row max over N", _row_max,
             lambda acc: {"D": acc, "rm": _f32(acc).amax(dim=-1)}, lambda acc: {"D": acc, "rm": acc.max(axis=-1)},
             aux={}, outputs={"D": ("MN", F16), "rm": ("M", F32)}),
    # BERT's erf-form GELU epilogues (bench/group_kernels.py's groups 1 and 3): W1 and W2 with gelu
    # and gelu_grad in place of the tanh forms
    Workload("B1", "BERT FFN forward: z = acc + bias; z, gelu(z) (erf form)", _bert_ffn_forward,
             lambda acc, bias: {"z": acc + bias, "act": __import__("torch").nn.functional.gelu(acc + bias)},
             lambda acc, bias: {"z": acc + bias, "act": _np_gelu(acc + bias)},
             aux={"bias": ("N", F16)}, outputs={"z": ("MN", F16), "act": ("MN", F16)}),
    Workload("B2", "BERT GELU backward: dz = acc * gelu'(z) (erf form); dz, dbias = colsum(dz)",
             _bert_gelu_backward,
             lambda acc, z: {"dz": _t_gelu_erf_backward(acc, z),
                             "dbias": _f32(_t_gelu_erf_backward(acc, z)).sum(dim=-2)},
             lambda acc, z: {"dz": acc * _np_gelu_grad(z), "dbias": (acc * _np_gelu_grad(z)).sum(axis=-2)},
             aux={"z": ("MN", F16)}, outputs={"dz": ("MN", F16), "dbias": ("N", F32)}),
)}
LADDER = {**RUNGS, **WORKLOADS}


# --- library anchors: other libraries' fused kernels for the same epilogue --------------------

def _torch_addmm_gelu(case):
    """cuBLASLt GELU_BIAS through torch (its GELU is the tanh form)."""
    import torch
    if not hasattr(torch, "_addmm_activation"):
        return None, "torch has no _addmm_activation"
    A, B, bias = case.A, case.B, case.aux["bias"]
    fn = lambda: torch._addmm_activation(bias, A, B, use_gelu=True)   # noqa: E731
    return (fn, lambda: {"D": fn()}), ""


def _nvmath_matmul(epilog_name, inputs_of, outputs_of):
    """nvmath-python's stateful Matmul (planned once, executed per call) on the transposed
    problem D^T = B^T A^T, so cuBLASLt's column-major epilogue vectors run along our N."""
    def make(case):
        try:
            from nvmath.linalg.advanced import Matmul, MatmulEpilog
        except Exception as e:  # noqa: BLE001
            return None, f"nvmath-python is not installed ({type(e).__name__}: {e}); pip install nvmath-python[cu13]"
        mm = Matmul(case.B.t(), case.A.t())
        mm.plan(epilog=getattr(MatmulEpilog, epilog_name), epilog_inputs=inputs_of(case))
        case.keep.append(mm)

        def outputs():
            res = mm.execute()
            result, aux = res if isinstance(res, tuple) else (res, {})
            return outputs_of(result, aux)
        return (lambda: mm.execute(), outputs), ""
    return make


def _first(aux, *names):
    for n in names:
        if n in aux:
            return aux[n]
    return next(iter(aux.values()))


_nvmath_gelu_aux_bias = _nvmath_matmul(
    "GELU_AUX_BIAS", lambda case: {"bias": case.aux["bias"]},
    lambda result, aux: {"z": _first(aux, "gelu_aux").t(), "act": result.t()})
_nvmath_dgelu_bgrad = _nvmath_matmul(
    "DGELU_BGRAD", lambda case: {"gelu_aux": case.aux["z"].t()},
    lambda result, aux: {"dx": result.t(), "dbias": _f32(_first(aux, "dgelu_bgrad", "bgrad"))})


def _cutlass_dsl_path():
    """The CuTe DSL puts its `cutlass` package on sys.path from a .pth file, which only site
    directories run: with the wheels installed into a plain --target folder on PYTHONPATH,
    `import cutlass` fails, or finds another package of that name (CUTLASS's older Python
    interface), unless the DSL's folder goes first."""
    import importlib.util
    if importlib.util.find_spec("nvidia_cutlass_dsl") is None:
        return
    import nvidia_cutlass_dsl
    path = os.path.join(list(nvidia_cutlass_dsl.__path__)[0], "dsl_packages")
    if path not in sys.path:
        sys.path.insert(0, path)
        for name in [m for m in sys.modules if m == "cutlass" or m.startswith("cutlass.")]:
            del sys.modules[name]         # an already imported namesake would shadow the DSL


def _quack(what):
    """QuACK (quack-kernels): gemm for D = acc, gemm_act for the GELU rungs."""
    def make(case):
        try:
            _cutlass_dsl_path()
            from quack import gemm_interface as qi
        except Exception as e:  # noqa: BLE001
            return None, f"QuACK is not installed ({type(e).__name__}: {e}); pip install quack-kernels"
        A, B = case.A, case.B
        # tuned=False first: QuACK's autotuner JIT-compiles many CuTe kernels (minutes); the API
        # differs between versions, so each spelling is tried in turn
        if what == "gemm":
            attempts = [lambda: qi.gemm(A, B, tuned=False), lambda: qi.gemm(A, B)]
        else:
            M, N = A.shape[0], B.shape[1]
            bias = case.aux["bias"]
            C = bias.expand(M, N).contiguous()
            kw = dict(activation="gelu_tanh_approx", store_preact=True)
            attempts = [lambda: qi.gemm_act(A, B, bias=bias, tuned=False, **kw),
                        lambda: qi.gemm_act(A, B, bias=bias, **kw),
                        lambda: qi.gemm_act(A, B, C=C, tuned=False, **kw),
                        lambda: qi.gemm_act(A, B, C=C, **kw)]
        errors = []
        for attempt in attempts:
            try:
                attempt()
            except Exception as e:  # noqa: BLE001 - the API differs between QuACK versions
                errors.append(f"{type(e).__name__}: {str(e)[:120]}")
                continue
            if what == "gemm":
                return (attempt, lambda: {"D": attempt()}), ""
            if what == "gelu":
                return (attempt, lambda: {"D": attempt()[1]}), ""
            return (attempt, lambda: dict(zip(("z", "act"), attempt()))), ""
        return None, "QuACK refused every spelling tried: " + " | ".join(errors)
    return make


ANCHORS = {
    "R0": [("QuACK gemm", _quack("gemm"))],
    "R2": [("torch._addmm_activation (cuBLASLt GELU_BIAS)", _torch_addmm_gelu), ("QuACK gemm_act", _quack("gelu"))],
    "W1": [("nvmath GELU_AUX_BIAS", _nvmath_gelu_aux_bias), ("QuACK gemm_act", _quack("gelu_aux"))],
    "W2": [("nvmath DGELU_BGRAD", _nvmath_dgelu_bgrad)],
}


# --- command line ------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(prog="python3 -m bench.ladder", description=__doc__.split("\n\n")[0])
    p.add_argument("--backends", default="",
                   help="comma-separated evt backend specs (default cupy; --quick: cupy:autotune=False)")
    p.add_argument("--shapes", default="", help="comma-separated MxNxK (default: the three standard shapes)")
    p.add_argument("--rungs", default="", help=f"comma-separated subset of {','.join(LADDER)}")
    p.add_argument("--rounds", type=int, default=None, help="interleaved timing rounds (default 5, --quick 3)")
    p.add_argument("--quick", action="store_true",
                   help="first shape only, 3 short rounds, no autotuning (< 3 min on an H200)")
    p.add_argument("--eager", action="store_true", help="also time eager PyTorch (matmul, then the ops)")
    p.add_argument("--cpu", action="store_true",
                   help="no GPU: check every rung through the numpy backend at the given shapes, no timing")
    p.add_argument("--out", default="bench/out/ladder", help="output folder (default bench/out/ladder)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--profile-once", action="store_true",
                   help="no timing: run each checked candidate once inside cudaProfilerStart/Stop, "
                        "for `ncu --profile-from-start off`")
    args = p.parse_args(argv)
    try:
        args.shapes = [parse_shape(s) for s in args.shapes.split(",") if s] or list(SHAPES[:1] if args.quick else SHAPES)
    except ValueError as e:
        p.error(str(e))
    unknown = [r for r in args.rungs.split(",") if r and r not in LADDER]
    if unknown:
        p.error(f"unknown rung(s) {unknown}; choose from {list(LADDER)}")
    args.rungs = [r for r in args.rungs.split(",") if r] or list(LADDER)
    # --quick keeps under 3 minutes by taking the first candidate tile instead of autotuning
    # every rung at every shape (the default ping-pong 64 x 256, what autotuning mostly picks)
    args.backends = [b for b in args.backends.split(",") if b] or (["cupy:autotune=False"] if args.quick else ["cupy"])
    if args.rounds is None:
        args.rounds = 3 if args.quick else 5
    if args.rounds < 1:
        p.error("--rounds must be at least 1")
    return args


def _meta(argv, device, extra=None):
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "device": device, "command": "python3 -m bench.ladder " + shlex.join(argv)}
    meta.update(extra or {})
    return meta


def run_gpu(args, argv):
    import torch

    from . import candidates as C
    from .report import write_results
    from .run import environment, evt_backends, profile_once, time_back_to_back, time_interleaved
    warmup_ms, rep_ms = (10, 40) if args.quick else (25, 100)
    meta = environment(argv)
    meta["command"] = "python3 -m bench.ladder " + shlex.join(argv)
    meta.update(rounds=args.rounds, warmup_ms=warmup_ms, rep_ms=rep_ms)
    results = {"meta": meta, "cases": []}
    backends = evt_backends(args.backends)
    t_start = time.perf_counter()
    for shape in args.shapes:
        for key in args.rungs:
            wl = LADDER[key]
            case_json = {"workload": key, "title": wl.title, "shape": list(shape), "flops": wl.flops(*shape),
                         "candidates": []}
            results["cases"].append(case_json)
            print(f"{key} {shape}: preparing ({time.perf_counter() - t_start:.0f} s elapsed)", file=sys.stderr,
                  flush=True)
            try:
                case = C.Case(wl, shape, seed=args.seed)
                case.keep = []
                A, B, aux, epi = case.A, case.B, case.aux, wl.torch_epilogue
                case.add(C.Candidate("cuBLAS", "library", lambda: torch.matmul(A, B), note="bare GEMM, the limit"),
                         outputs_fn=lambda: {"acc": torch.matmul(A, B)}, reference=case.gemm_reference)
                if args.eager:
                    case.add(C.Candidate("eager", "library", lambda: epi(torch.matmul(A, B), **aux),
                                         note="torch.matmul, then the epilogue ops unfused"))
                for name, support in backends.items():
                    case.add_evt_backend(name, support)
                for name, make in ANCHORS.get(key, []):
                    _add_anchor(case, C, name, make)
                if args.profile_once:
                    profile_once(case.candidates)
                else:
                    time_interleaved(case.candidates, args.rounds, warmup_ms, rep_ms)
                if not (args.quick or args.profile_once):
                    time_back_to_back(case.candidates)
                case_json["candidates"] = [c.to_json() for c in case.candidates]
                del case
            except Exception as e:  # noqa: BLE001 - a harness bug loses one case, not the run
                traceback.print_exc()
                case_json["skipped"] = f"harness error: {type(e).__name__}: {e}"
            torch.cuda.empty_cache()
            case_json["elapsed_s"] = round(time.perf_counter() - t_start, 1)
            write_results(results, args.out)
            write_ladder(results, args.out)
    return results


def _add_anchor(case, C, name, make):
    try:
        made, why = make(case)
    except Exception as e:  # noqa: BLE001 - a library that breaks is a row, not a crash
        made, why = None, f"set-up raised {C._short(e)}"
    if made is None:
        case.candidates.append(C.Candidate(name, "library").fail("unavailable", why))
        return
    fn, outputs_fn = made
    case.add(C.Candidate(name, "library", fn, note="library anchor"), outputs_fn=outputs_fn)


def run_cpu(args, argv):
    """Every rung through the numpy backend (the reference interpreter) at the given shapes,
    checked against the rung's NumPy spelling with bench.checks; nothing is timed."""
    import evt_core

    from .checks import check_outputs
    from .report import write_results
    results = {"meta": _meta(argv, "cpu (numpy backend, no timing)", {"rounds": 0}), "cases": []}
    for shape in args.shapes:
        M, N, K = shape
        for key in args.rungs:
            wl = LADDER[key]
            A, B, aux = wl.numpy_inputs(M, N, K, seed=args.seed)
            acc = A.astype(np.float32) @ B.astype(np.float32)
            ref = {k: np.asarray(v, np.float64) for k, v in
                   wl.numpy_epilogue(acc, **{k: v.astype(np.float32) for k, v in aux.items()}).items()}
            cand = {"name": "numpy", "mode": "call", "status": "ok", "reason": "", "errors": {}, "compile_s": None,
                    "round_us": [], "wall_us": None, "note": "reference interpreter, not timed"}
            try:
                kern = evt_core.compile(evt_core.trace(wl.epilogue, wl.example(M, N)), backend="numpy")
                got = kern(A, B, **aux)
                why, cand["errors"] = check_outputs(got, ref, lambda x: np.asarray(x, np.float64))
                if why:
                    cand.update(status="wrong", reason=why)
            except Exception as e:  # noqa: BLE001
                cand.update(status="error", reason=f"{type(e).__name__}: {e}")
            anchors = [{"name": name, "mode": "library", "status": "skipped", "reason": "--cpu: GPU libraries not run",
                        "errors": {}, "compile_s": None, "round_us": [], "wall_us": None, "note": ""}
                       for name, _ in ANCHORS.get(key, [])]
            results["cases"].append({"workload": key, "title": wl.title, "shape": list(shape),
                                     "flops": wl.flops(*shape), "candidates": [cand] + anchors})
    write_results(results, args.out)
    write_ladder(results, args.out)
    return results


# --- the ladder table ---------------------------------------------------------------------------

def ladder_rows(results):
    """(rung, shape, candidate, µs, × cuBLAS, TFLOP/s, status/notes) per candidate other than cuBLAS."""
    from .report import rows
    out = []
    for case in results["cases"]:
        shape = "×".join(str(e) for e in case["shape"])
        if case.get("skipped"):
            out.append((case["workload"], shape, "—", None, None, None, None, f"not measured: {case['skipped']}"))
            continue
        derived = rows(case)
        base = next((r for r in derived if r["name"] == "cuBLAS"), None)
        for r in derived:
            if r["name"] == "cuBLAS":
                continue
            note = r["note"] if r["status"] != "ok" else r["kernel"]     # ok rows: which kernel ran
            out.append((case["workload"], shape, f"{r['name']} ({r['mode']})", base and base["time_us"],
                        r["time_us"], r["x_cuBLAS"], r["tflops"], note))
    return out


def ladder_markdown(results):
    def f(x, spec):
        return format(x, spec) if x is not None else "—"
    titles = {}
    for case in results["cases"]:
        titles.setdefault(case["workload"], case.get("title", ""))
    meta = results["meta"]
    lines = [f"# Epilogue ladder\n\n* date: {meta.get('date', '?')}\n* device: {meta.get('device', '?')}\n"
             f"* command: `{meta.get('command', '?')}`\n* method: as bench/README.md (checked first, then "
             f"{meta.get('rounds', '?')} interleaved rounds; × cuBLAS is the median of per-round ratios; target "
             f"≤ 1.05)\n", "\n".join(f"* **{k}** {v}" for k, v in titles.items()), "",
             "| rung | M×N×K | candidate | cuBLAS µs | µs | × cuBLAS | TFLOP/s | notes |",
             "|---|---|---|---:|---:|---:|---:|---|"]
    for rung, shape, name, base, t, x, tf, note in ladder_rows(results):
        lines.append(f"| {rung} | {shape} | {name} | {f(base, '.1f')} | {f(t, '.1f')} | {f(x, '.3f')} "
                     f"| {f(tf, '.0f')} | {note.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def write_ladder(results, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "LADDER.md"), "w") as fh:
        fh.write(ladder_markdown(results))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    results = run_cpu(args, argv) if args.cpu else run_gpu(args, argv)
    with open(os.path.join(args.out, "LADDER.md")) as fh:
        print(fh.read())
    bad = [c for case in results["cases"] for c in case["candidates"] if c["status"] in ("wrong", "error")]
    return 1 if (not results["cases"] or (args.cpu and bad)) else 0


if __name__ == "__main__":
    sys.exit(main())
