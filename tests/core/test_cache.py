"""evt_core.cache: verified entries, discarding of damaged ones, the fallback for an unusable
$EVT_CACHE_DIR, and concurrent writers. Both backends' use of it is checked on the CPU: the
numba_cuda cubin cache with a real cubin, the cupy autotune cache with its own entries."""
import multiprocessing
import os
import warnings

import pytest

from evt_core import cache
from evt_core.cache import CacheWarning, DiskCache

FILES = {".bin": os.urandom(4096), ".txt": b"hello"}


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(cache.ENV, str(tmp_path))
    cache.reset()
    yield tmp_path
    cache.reset()


def _data_file(d, key, suffix):
    (path,) = [p for p in d.iterdir() if p.name.startswith(key) and p.name.endswith(suffix)]
    return path


def _one_warning(record, fragment):
    msgs = [str(w.message) for w in record if issubclass(w.category, CacheWarning)]
    assert len(msgs) == 1 and fragment in msgs[0], msgs
    return msgs[0]


def test_round_trip_and_miss(cache_dir):
    c = DiskCache("t")
    assert c.get("k" * 32) is None
    c.put("k" * 32, FILES, {"entry": "x"})
    assert c.get("k" * 32) == ({"entry": "x"}, FILES)


DAMAGE = {
    "random-bytes-manifest": lambda d, k: (d / f"{k}.json").write_bytes(os.urandom(300)),
    "truncated-data": lambda d, k: _data_file(d, k, ".bin").write_bytes(FILES[".bin"][:1000]),
    "same-size-other-bytes": lambda d, k: _data_file(d, k, ".bin").write_bytes(os.urandom(4096)),
    "data-is-a-directory": lambda d, k: (lambda p: (p.unlink(), p.mkdir()))(_data_file(d, k, ".bin")),
    "manifest-is-a-directory": lambda d, k: ((d / f"{k}.json").unlink(), (d / f"{k}.json").mkdir()),
    "data-missing": lambda d, k: _data_file(d, k, ".txt").unlink(),
    "manifest-not-an-object": lambda d, k: (d / f"{k}.json").write_text("[1, 2]"),
    "manifest-points-outside": lambda d, k: (d / f"{k}.json").write_text(
        '{"format": 1, "meta": {}, "files": {".bin": {"name": "../../etc/passwd", "size": 1, "sha256": ""}}}'),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_discarded_with_one_warning_and_rebuilt(cache_dir, damage):
    c, key = DiskCache("t"), "a" * 32
    c.put(key, FILES)
    DAMAGE[damage](cache_dir / "t", key)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert c.get(key) is None
        assert c.get(key) is None            # discarded: the second look is a plain miss
    _one_warning(rec, key)
    assert not any(p.name.startswith(key) for p in (cache_dir / "t").iterdir())
    c.put(key, FILES)
    assert c.get(key) == ({}, FILES)


def test_an_entry_from_before_manifests_is_a_quiet_miss(cache_dir):
    """The numba cache once wrote {"entry": ..., "image_kind": ...} manifests: not corrupt,
    just old; a miss without a warning, replaced by the next put."""
    d = cache_dir / "numba"
    d.mkdir()
    (d / f"{'c' * 32}.json").write_text('{"entry": "evt_kernel", "image_kind": "cubin"}')
    (d / f"{'c' * 32}.cubin").write_bytes(b"old")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert DiskCache("numba").get("c" * 32) is None
        DiskCache("numba").put("c" * 32, FILES)
        assert DiskCache("numba").get("c" * 32) == ({}, FILES)


def _fallback_case(monkeypatch, tmp_path, kind):
    if kind == "empty":
        monkeypatch.setenv(cache.ENV, "")
    elif kind == "file":
        f = tmp_path / "plain-file"
        f.write_text("x")
        monkeypatch.setenv(cache.ENV, str(f))
    elif kind == "under-a-file":
        f = tmp_path / "plain-file"
        f.write_text("x")
        monkeypatch.setenv(cache.ENV, str(f / "cache"))
    else:   # read-only: root ignores permission bits, so the write probe is made to fail
        monkeypatch.setenv(cache.ENV, str(tmp_path / "ro"))

        def refuse(d):
            raise PermissionError(13, "Read-only file system")
        monkeypatch.setattr(cache, "_probe", refuse)


@pytest.mark.parametrize("kind", ["empty", "file", "under-a-file", "read-only"])
def test_unusable_cache_dir_falls_back_with_one_warning(tmp_path, monkeypatch, kind):
    monkeypatch.chdir(tmp_path)
    cache.reset()
    _fallback_case(monkeypatch, tmp_path, kind)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c = DiskCache("numba")
        c.put("b" * 32, FILES)
        assert c.get("b" * 32) == ({}, FILES)
        c.put("c" * 32, FILES)
    msg = _one_warning(rec, cache.ENV if kind != "read-only" else "not a writable directory")
    assert "private temporary cache" in msg
    assert not (tmp_path / "numba").exists(), "the empty value wrote into the working directory"
    cache.reset()


PAYLOADS = [bytes([i]) * (50_000 + i) for i in range(4)]


def _writer(args):
    """Write and read one key 30 times; count reads that were not some writer's whole payload
    (a miss after our own write would mean an entry was wrongly discarded)."""
    root, key, i = args
    os.environ[cache.ENV] = root
    cache.reset()
    c = DiskCache("t")
    bad = 0
    for _ in range(30):
        c.put(key, {".bin": PAYLOADS[i]})
        hit = c.get(key)
        bad += hit is None or hit[1][".bin"] not in PAYLOADS
    return bad


def test_concurrent_writers_never_expose_a_torn_entry(cache_dir):
    """Four processes write and read the same key at once: every read is one writer's whole
    payload, never a mix or a torn file, and nothing is discarded."""
    ctx = multiprocessing.get_context("fork")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CacheWarning)
        with ctx.Pool(4) as pool:
            bad = pool.map(_writer, [(str(cache_dir), "d" * 32, i) for i in range(4)])
    assert sum(bad) == 0
    meta, files = DiskCache("t").get("d" * 32)
    assert files[".bin"] in PAYLOADS
    assert not [p for p in (cache_dir / "t").iterdir() if p.name.endswith(".tmp")]


def test_cupy_autotune_uses_the_shared_cache(cache_dir):
    from evt_backends.cupy import autotune
    assert autotune.load("program|spec|class|H200") is None
    autotune.store("program|spec|class|H200", "128x128x64-s4")
    assert autotune.load("program|spec|class|H200") == "128x128x64-s4"
    (manifest,) = (cache_dir / "cupy" / "autotune").glob("*.json")
    manifest.write_bytes(os.urandom(64))
    with pytest.warns(CacheWarning, match="discarding the corrupt cache entry"):
        assert autotune.load("program|spec|class|H200") is None


def _cut(p):
    p.write_bytes(p.read_bytes()[:100])


def _scramble(p):
    p.write_bytes(os.urandom(p.stat().st_size))


def _dir(p):
    p.unlink()
    p.mkdir()


@pytest.mark.parametrize("damage", [_cut, _scramble, _dir], ids=["truncated", "random-bytes", "directory"])
def test_numba_cubin_cache_rebuilds_a_damaged_cubin(cache_dir, damage):
    """A real sm_90 cubin built on the CPU: damaging it under its intact manifest gives one
    warning and a rebuild, never a load of the damaged bytes."""
    pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from evt_backends.numba_cuda.codegen.abi import finish_params
    from evt_backends.numba_cuda.codegen.finish import finish_source
    from evt_backends.numba_cuda.runtime import build
    from tests.numba_cuda.trees import case
    tree, *_ = case("bias_relu_stats", 2, 13, 11, 9)
    p = tree.program
    key = build.cache_key("test_cache", p.key(), damage.__name__)
    first = build.build(key, finish_source(p), "evt_finish", finish_params(p))
    build._memory.clear()
    (cubin,) = (cache_dir / "numba").glob(f"{key}-*.{first.image_kind}")
    damage(cubin)
    before = build.COMPILES["count"]
    with pytest.warns(CacheWarning, match=key):
        again = build.build(key, finish_source(p), "evt_finish", finish_params(p))
    # rebuilt (numba numbers its modules, so the bytes may differ in a name, not in size)
    assert build.COMPILES["count"] == before + 1 and len(again.image) == len(first.image)
    build._memory.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert build.build(key, finish_source(p), "evt_finish", finish_params(p)).image == again.image
    assert build.COMPILES["count"] == before + 1


def test_no_directory_at_all_keeps_working_in_memory(tmp_path, monkeypatch):
    """An unusable $EVT_CACHE_DIR and no temporary directory either: one warning, every get is
    a miss, every put a no-op (the backends' in-memory caches still hold their kernels)."""
    cache.reset()
    monkeypatch.setattr(cache, "_fallback", [])
    monkeypatch.setenv(cache.ENV, "")

    def no_tmp(**kw):
        raise FileNotFoundError(2, "No usable temporary directory")
    monkeypatch.setattr(cache.tempfile, "mkdtemp", no_tmp)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        c = DiskCache("numba")
        for _ in range(2):
            c.put("a" * 32, FILES)
            assert c.get("a" * 32) is None
    msgs = [str(w.message) for w in rec if issubclass(w.category, CacheWarning)]
    assert len(msgs) == 1 and "kept in memory" in msgs[0], msgs
    cache.reset()
