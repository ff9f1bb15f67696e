"""Turns the benchmark's raw results (plain dicts, as saved in results.json) into RESULTS.md.

Pure Python on purpose: the CPU tests build results by hand and check the table.
"""
import json
import os
import statistics

BASELINES = ("cuBLAS", "torch.compile", "eager")


def median_us(cand):
    return statistics.median(cand["round_us"]) if cand.get("round_us") else None


def paired_ratio(cand, base):
    """Median over rounds of cand/base, each round's pair timed seconds apart: the only ratio
    that survives the H200's clock drift between rounds."""
    if not cand or not base or not cand.get("round_us") or not base.get("round_us"):
        return None
    pairs = [c / b for c, b in zip(cand["round_us"], base["round_us"]) if b > 0]
    return statistics.median(pairs) if pairs else None


def rows(case):
    """One dict per candidate with the derived numbers the table shows."""
    by_name = {c["name"]: c for c in case["candidates"] if c["mode"] == "library"}
    out = []
    for c in case["candidates"]:
        t = median_us(c)
        row = {"name": c["name"], "mode": c["mode"], "status": c["status"], "time_us": t,
               "tflops": case["flops"] / t / 1e6 if t else None, "wall_us": c.get("wall_us")}
        for b in BASELINES:
            row[f"x_{b}"] = paired_ratio(c, by_name.get(b)) if t else None
        row["note"] = _note(c)
        row["kernel"] = c.get("kernel", "")
        out.append(row)
    return out


def _note(c):
    parts = []
    if c["status"] != "ok":
        parts.append(f"**{c['status']}**: {c['reason']}")
    if c.get("kernel"):
        parts.append(f"kernel: {c['kernel']}")
    if c.get("note"):
        parts.append(c["note"])
    if c.get("compile_s"):
        parts.append(f"compile {c['compile_s']:.1f} s")
    if c["status"] == "ok" and c.get("errors"):
        worst = max((s.get("rel_l2", 0.0) for s in c["errors"].values()), default=0.0)
        parts.append(f"rel err {worst:.1e}")
    return "; ".join(parts).replace("|", "/").replace("\n", " ")


def _fmt(x, spec):
    return format(x, spec) if x is not None else "—"


HEADER = ("| workload | M×N×K | candidate | mode | time µs | TFLOP/s | × cuBLAS | × torch.compile | × eager "
          "| wall µs/call | notes |\n|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")


def table(results):
    lines = [HEADER]
    for case in results["cases"]:
        shape = "×".join(str(e) for e in case["shape"])
        if case.get("skipped"):
            lines.append(f"| {case['workload']} | {shape} | — | — | — | — | — | — | — | — | "
                         f"**not measured**: {case['skipped']} |")
            continue
        for r in rows(case):
            lines.append(f"| {case['workload']} | {shape} | {r['name']} | {r['mode']} | {_fmt(r['time_us'], '.1f')} "
                         f"| {_fmt(r['tflops'], '.0f')} | {_fmt(r['x_cuBLAS'], '.2f')} "
                         f"| {_fmt(r['x_torch.compile'], '.2f')} | {_fmt(r['x_eager'], '.2f')} "
                         f"| {_fmt(r['wall_us'], '.1f')} | {r['note']} |")
    return "\n".join(lines)


def markdown(results):
    meta = results["meta"]
    versions = ", ".join(f"{k} {v}" for k, v in meta.get("versions", {}).items())
    titles = {}
    for case in results["cases"]:
        titles.setdefault(case["workload"], case.get("title", ""))
    legend = "\n".join(f"* **{k}** {v}" for k, v in titles.items())
    return f"""# Fused epilogue benchmark

* date: {meta.get('date', '?')}
* device: {meta.get('device', '?')}
* command: `{meta.get('command', '?')}`
* software: {versions}
* method: every candidate checked against an fp32 reference first (outputs NaN-poisoned before the
  check; a wrong one is not timed); then {meta.get('rounds', '?')} interleaved rounds of
  `triton.testing.do_bench` (warmup {meta.get('warmup_ms', '?')} ms, rep {meta.get('rep_ms', '?')} ms,
  median, L2 flushed between repetitions). time = median over rounds; every × column is the median
  over rounds of (this time / that baseline's time in the same round): below 1 is faster.
* modes: **call** = `kernel(A, B, **inputs)` as users call it (binding, output allocation, reduction
  initialisation included); **launch** = the backend's pre-bound launch on preallocated outputs (pure
  kernel time); **library** = PyTorch. wall µs/call = host time of 20 back-to-back calls (no flush),
  which exposes host overhead that event timing hides behind the preceding flush.
* TFLOP/s counts the GEMM only (2MNK). fp16 A, B, aux and stored tensors; fp32 accumulation and
  reduction outputs.

{legend}

{table(results)}
"""


def write_results(results, out_dir, plot=False):
    """RESULTS.md and results.json into out_dir; plot.png too when asked (needs matplotlib)."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(results, f, indent=1, default=str)
    text = markdown(results)
    if plot:
        from .plot import plot_results
        try:
            plot_results(results, os.path.join(out_dir, "plot.png"))
        except Exception as e:  # noqa: BLE001 - a missing matplotlib must not lose the table
            text += f"\nplot.png not written: {type(e).__name__}: {e}\n"
    with open(os.path.join(out_dir, "RESULTS.md"), "w") as f:
        f.write(text)
