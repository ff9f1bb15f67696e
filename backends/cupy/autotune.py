"""Pick a tile configuration by timing the FUSED kernel (epilogue included) on the call's own
arrays, over the small candidate set `select.candidates` gives, and remember the winner on disk
(~/.cache/evt/cupy/autotune.json, or $EVT_CACHE_DIR/cupy/autotune.json) per Program key, Spec,
shape class and device name.
"""
import json
import os
import sys
import time
from pathlib import Path


def cache_path():
    root = os.environ.get("EVT_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "evt"
    return base / "cupy" / "autotune.json"


def shape_class(b):
    """Problems in one class share a winner: extents rounded up to powers of two."""
    p2 = lambda x: 1 << max(0, (x - 1).bit_length())  # noqa: E731
    return f"L{min(b.L, 2)}-M{p2(b.M)}-N{p2(b.N)}-K{p2(b.K)}"


def cache_key(program, spec, b, device_name):
    return f"{program.key()}|{spec}|{shape_class(b)}|{device_name}"


def load(key):
    try:
        return json.loads(cache_path().read_text()).get(key)
    except (OSError, ValueError):
        return None


def store(key, label):
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        data = json.loads(path.read_text()) if path.exists() else {}
        data[key] = label
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
        tmp.replace(path)      # atomic: concurrent tuners never leave a torn file
    except (OSError, ValueError):
        pass                   # a read-only home only costs re-tuning


def _progress(i, n, label, best):
    bar = "#" * (20 * i // n) + "." * (20 - 20 * i // n)
    sys.stderr.write(f"\r[evt cupy autotune] [{bar}] {i}/{n} {label} best={best}   ")
    if i == n:
        sys.stderr.write("\n")
    sys.stderr.flush()


def time_launch(launch, reps=10):
    """Median-free mean over `reps` launches between CUDA events, after 2 warm-ups (ms)."""
    import cupy as cp
    for _ in range(2):
        launch()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(reps):
        launch()
    end.record()
    end.synchronize()
    return cp.cuda.get_elapsed_time(start, end) / reps


def tune(configs, build, bound):
    """build(cfg) -> CompiledKernel. Returns (best CompiledKernel, {label: ms})."""
    results, best, best_ms = {}, None, float("inf")
    t0 = time.perf_counter()
    for i, cfg in enumerate(configs):
        _progress(i, len(configs), cfg.label(), "-" if best is None else best.cfg.label())
        try:
            k = build(cfg)
            ms = time_launch(lambda: k.launch(bound))
        except Exception as e:  # noqa: BLE001 - a candidate that fails to build is skipped, not fatal
            results[cfg.label()] = f"failed: {type(e).__name__}"
            continue
        results[cfg.label()] = ms
        if ms < best_ms:
            best, best_ms = k, ms
    _progress(len(configs), len(configs), f"{time.perf_counter() - t0:.1f}s", best.cfg.label() if best else "-")
    return best, results
