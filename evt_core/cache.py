"""The on-disk cache every backend keeps its build products in (numba_cuda: generated source,
PTX and cubins; cupy: autotuning winners), under $EVT_CACHE_DIR (default ~/.cache/evt).

Invariants:
  * A cache hit returns exactly the bytes `put` stored, or nothing: every entry has a manifest
    `<key>.json` recording the size and SHA-256 of each of its files, and `get` checks them
    before use. A corrupt, truncated or foreign entry (random bytes, a cubin cut short under an
    intact manifest, a file replaced by a directory) is discarded with ONE CacheWarning and
    reported as a miss, so the caller rebuilds it.
  * Concurrent processes are safe: each file is written to a temporary name in the same
    directory and moved into place with os.replace (atomic on POSIX), data files before the
    manifest. Data files are named by their content digest, so a manifest always points at
    complete files of its own write, never at another writer's half.
  * An unusable $EVT_CACHE_DIR (empty, naming a file, not creatable, not writable) never breaks
    a compile: the process falls back to a private temporary directory (or, if none can be
    made, to the backends' in-memory caches alone), with one warning per distinct value. A
    write that fails later only costs a rebuild next time (one warning).
"""
import atexit
import hashlib
import json
import os
import shutil
import tempfile
import threading
import warnings
from pathlib import Path

ENV = "EVT_CACHE_DIR"
FORMAT = 1
_lock = threading.Lock()
_roots = {}            # raw $EVT_CACHE_DIR value (None: unset) -> resolved root
_fallback = []         # the private temporary root, created on first need
_write_warned = set()  # directories whose write failure was already reported


class CacheWarning(RuntimeWarning):
    """The compile cache could not be used as configured (it still works, see the message)."""


def root():
    """The cache root directory, created and known to be writable. OSError when there is no
    usable directory at all (not even a temporary one): callers then keep entries in memory."""
    raw = os.environ.get(ENV)
    with _lock:
        if raw not in _roots:
            _roots[raw] = _resolve(raw)
        hit = _roots[raw]
    if hit is None:
        raise OSError(f"no writable directory for the evt cache ({ENV}={raw!r})")
    return hit


def _resolve(raw):
    if raw is None:
        wanted = Path.home() / ".cache" / "evt"
    elif not raw.strip():
        return _fall_back(f"{ENV} is set but empty")
    else:
        wanted = Path(raw).expanduser().absolute()     # a later chdir must not move the cache
    if wanted.exists() and not wanted.is_dir():
        return _fall_back(f"{ENV}={raw!r} names a file, not a directory" if raw is not None
                          else f"{wanted} is a file, not a directory")
    try:
        wanted.mkdir(parents=True, exist_ok=True)
        _probe(wanted)
    except OSError as e:
        what = f"{ENV}={raw!r}" if raw is not None else str(wanted)
        return _fall_back(f"{what} is not a writable directory ({type(e).__name__}: {e.strerror or e})")
    return wanted


def _probe(directory):
    """Raise OSError unless a file can be created in `directory` (os.access is not enough:
    it answers yes to root on a read-only mount)."""
    fd, name = tempfile.mkstemp(dir=directory, prefix=".evt-probe-")
    os.close(fd)
    os.unlink(name)


def _fall_back(reason):
    """The private temporary root (None, with the warning saying so, when even that fails)."""
    if not _fallback:
        try:
            d = Path(tempfile.mkdtemp(prefix="evt-cache-"))
        except OSError as e:
            warnings.warn(f"evt: {reason}, and no temporary directory can be made ({e}); compiled kernels "
                          f"are kept in memory for this process only. Set {ENV} to a writable directory.",
                          CacheWarning, stacklevel=5)
            return None
        atexit.register(shutil.rmtree, d, True)
        _fallback.append(d)
    warnings.warn(f"evt: {reason}; using a private temporary cache {_fallback[0]} for this process "
                  f"(compiled kernels are not kept across runs). Set {ENV} to a writable directory.",
                  CacheWarning, stacklevel=5)
    return _fallback[0]


def reset():
    """Forget resolved roots (tests that change $EVT_CACHE_DIR's meaning mid-process)."""
    with _lock:
        _roots.clear()
        _write_warned.clear()


class DiskCache:
    """Entries of one backend under root()/namespace: `get(key)` -> (meta, {suffix: bytes}) or
    None; `put(key, files, meta)`. Keys are hex digests (file-name safe)."""

    def __init__(self, namespace):
        self.namespace = namespace

    def directory(self):
        d = root() / self.namespace
        d.mkdir(parents=True, exist_ok=True)
        return d

    def get(self, key):
        try:
            d = self.directory()
        except OSError:
            return None
        manifest = d / f"{key}.json"
        if not manifest.exists():
            return None
        try:
            info = json.loads(manifest.read_bytes())
            if isinstance(info, dict) and "format" not in info and "files" not in info:
                return None     # written before manifests had a format: a plain miss, put() replaces it
            if not isinstance(info, dict) or info.get("format") != FORMAT:
                raise ValueError("not a manifest of this format")
            files = {}
            for suffix, rec in info["files"].items():
                if not isinstance(rec["name"], str) or not rec["name"].startswith(f"{key}-") or \
                        os.sep in rec["name"] or (os.altsep and os.altsep in rec["name"]):
                    raise ValueError(f"file name {rec['name']!r} is not one of this entry's")   # never leave d
                data = (d / rec["name"]).read_bytes()
                if len(data) != rec["size"]:
                    raise ValueError(f"{rec['name']} has {len(data)} bytes, {rec['size']} were written")
                if hashlib.sha256(data).hexdigest() != rec["sha256"]:
                    raise ValueError(f"{rec['name']} does not match the SHA-256 recorded at write")
                files[suffix] = data
            return info.get("meta", {}), files
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            self.discard(key, f"{type(e).__name__}: {e}")
            return None

    def put(self, key, files, meta=None):
        """Store `files` ({suffix: bytes}) and `meta` (JSON-able) under `key`; never raises."""
        try:
            root()
        except OSError:
            return          # no directory at all: root() warned once, entries stay in memory
        try:
            d = self.directory()
            recs = {}
            for suffix, data in files.items():
                digest = hashlib.sha256(data).hexdigest()
                name = f"{key}-{digest[:16]}{suffix}"
                _atomic_write(d / name, data)
                recs[suffix] = {"name": name, "size": len(data), "sha256": digest}
            body = {"format": FORMAT, "meta": meta or {}, "files": recs}
            _atomic_write(d / f"{key}.json", json.dumps(body, sort_keys=True).encode())
        except OSError as e:
            where = os.environ.get(ENV) or "~/.cache/evt"
            if where not in _write_warned:
                _write_warned.add(where)
                warnings.warn(f"evt: cannot write the compile cache in {where} ({type(e).__name__}: {e}); "
                              "kernels are rebuilt in each process", CacheWarning, stacklevel=2)

    def discard(self, key, reason):
        """Remove every file (or directory) of entry `key`, with one warning saying why."""
        d = root() / self.namespace     # get() found the entry, so root() resolved
        warnings.warn(f"evt: discarding the corrupt cache entry {key} in {d} ({reason}); it is rebuilt",
                      CacheWarning, stacklevel=3)
        for p in d.glob(f"{key}*"):
            try:
                shutil.rmtree(p) if p.is_dir() and not p.is_symlink() else p.unlink()
            except OSError:
                pass    # another process removed or replaced it first: equally fine


def _atomic_write(path, data):
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write(path, data):
    """Write bytes to `path` through a temporary file and os.replace (readers never see a torn
    file). For files next to the cache that are not entries (e.g. generated sources)."""
    _atomic_write(Path(path), data)
