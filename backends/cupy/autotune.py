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
    """Mean GPU time of `reps` back-to-back launches between CUDA events, after 2 warm-ups (ms).
    `launch` must cost less host time than the kernel takes, or the events time the host."""
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


ROUNDS = 3


def tune(configs, build, bound):
    """build(cfg) -> CompiledKernel. Returns (best CompiledKernel, {label: ms}).

    Every candidate is built and prepared once, then timed in ROUNDS interleaved rounds (the
    order rotated each round) and ranked by its median: the H200's clock drifts by up to 25 %
    within seconds, so candidates timed one after the other would be ranked by the clock. A
    timed launch is the prepared launch alone (`Prepared.fire`, one cuLaunchKernel per kernel),
    not binding and tensor-map encoding, which cost about as much host time as a whole kernel."""
    results, ready = {}, []
    t0 = time.perf_counter()
    outs = [t.array.ptr for t in bound.outputs] + [t.array.ptr for t in bound.reductions]
    for i, cfg in enumerate(configs):
        _progress(i, len(configs), cfg.label(), "building")
        try:
            k = build(cfg)
            prepared = k.prepare(bound)
            prepared.fire(outs)           # compiles the fast launch; a failure skips the candidate
        except Exception as e:  # noqa: BLE001 - a candidate that fails to build is skipped, not fatal
            results[cfg.label()] = f"failed: {type(e).__name__}"
            continue
        ready.append((k, prepared))
    times = {id(k): [] for k, _ in ready}
    for r in range(ROUNDS):
        order = ready[r % len(ready):] + ready[:r % len(ready)] if ready else []
        for k, prepared in order:
            try:
                times[id(k)].append(time_launch(lambda: prepared.fire(outs)))
            except Exception as e:  # noqa: BLE001
                results[k.cfg.label()] = f"failed: {type(e).__name__}"
    best, best_ms = None, float("inf")
    for k, _ in ready:
        ts = sorted(times[id(k)])
        if not ts or isinstance(results.get(k.cfg.label()), str):
            continue
        ms = ts[len(ts) // 2]
        results[k.cfg.label()] = ms
        if ms < best_ms:
            best, best_ms = k, ms
    _progress(len(configs), len(configs), f"{time.perf_counter() - t0:.1f}s", best.cfg.label() if best else "-")
    return best, results
