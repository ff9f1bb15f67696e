"""plot.png: one panel per (shape, workload), one bar per timed candidate (µs, lower is
better), each bar labelled with its time relative to cuBLAS in the same rounds."""
from .report import rows


def plot_results(results, path):
    import matplotlib
    matplotlib.use("Agg")                      # no display on the GPU machine
    import matplotlib.pyplot as plt

    cases = [c for c in results["cases"] if not c.get("skipped")]
    if not cases:
        raise ValueError("no measured case to plot")
    shapes = sorted({tuple(c["shape"]) for c in cases}, key=lambda s: [tuple(x["shape"]) for x in cases].index(s))
    workloads = list(dict.fromkeys(c["workload"] for c in cases))
    fig, axes = plt.subplots(len(shapes), len(workloads), squeeze=False,
                             figsize=(4.2 * len(workloads), 3.4 * len(shapes)))
    for ax in axes.flat:
        ax.set_visible(False)
    for case in cases:
        ax = axes[shapes.index(tuple(case["shape"]))][workloads.index(case["workload"])]
        ax.set_visible(True)
        timed = [r for r in rows(case) if r["time_us"] is not None]
        labels = [r["name"] if r["mode"] in ("library", "call") else f"{r['name']}\n({r['mode']})" for r in timed]
        colors = ["0.55" if r["mode"] == "library" else "tab:blue" if r["mode"] == "call" else "tab:green"
                  for r in timed]
        bars = ax.bar(range(len(timed)), [r["time_us"] for r in timed], color=colors)
        for bar, r in zip(bars, timed):
            if r["x_cuBLAS"] is not None:
                ax.annotate(f"{r['x_cuBLAS']:.2f}×", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                            ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(timed)), labels, rotation=35, ha="right", fontsize=7)
        ax.set_ylabel("µs")
        ax.set_title(f"{case['workload']} {'×'.join(map(str, case['shape']))}", fontsize=9)
        missing = [f"{c['name']}: {c['status']}" for c in case["candidates"] if c["status"] != "ok"]
        if missing:
            ax.text(0.02, 0.98, "\n".join(missing)[:200], transform=ax.transAxes, va="top", fontsize=6, color="tab:red")
    fig.suptitle(f"{results['meta'].get('device', '')}: fused epilogues vs PyTorch "
                 f"(label: time / cuBLAS GEMM)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
