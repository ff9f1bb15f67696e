"""Pick a tile configuration by timing the FUSED kernel (epilogue included) on the call's own
arrays, over the small candidate set `select.candidates` gives, and remember the winner on disk
per Program key, Spec, shape class and device name: one evt_core.cache entry each under
$EVT_CACHE_DIR/cupy/autotune (default ~/.cache/evt), so a corrupt entry is discarded and
re-tuned and concurrent tuners never lose each other's results.
"""
import hashlib
import sys
import time

from evt_core.cache import DiskCache

_disk = DiskCache("cupy/autotune")


def shape_class(b):
    """Problems in one class share a winner: extents rounded up to powers of two."""
    p2 = lambda x: 1 << max(0, (x - 1).bit_length())  # noqa: E731
    return f"L{min(b.L, 2)}-M{p2(b.M)}-N{p2(b.N)}-K{p2(b.K)}"


def cache_key(program, spec, b, device_name):
    return f"{program.key()}|{spec}|{shape_class(b)}|{device_name}"


def _entry(key):
    return hashlib.sha256(key.encode()).hexdigest()[:32]


def load(key):
    """The remembered winner's label for `key`, or None (never tuned, or a discarded entry)."""
    hit = _disk.get(_entry(key))
    if hit is None:
        return None
    meta, files = hit
    if meta.get("key") != key or set(files) != {".label"}:
        return None        # a digest collision or a foreign entry: tune again
    return files[".label"].decode()


def store(key, label):
    """Remember `label` for `key` (a cache that cannot be written only costs re-tuning)."""
    _disk.put(_entry(key), {".label": label.encode()}, {"key": key})


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
