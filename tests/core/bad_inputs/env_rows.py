"""Environment variables, plugins and the compile cache."""
import os
import tempfile
import warnings

import evt_core
from evt_core import cache
from evt_core.backend import Backend, Kernel, Support
from evt_core.cache import CacheWarning, DiskCache
from evt_core.errors import (ArgumentError, BackendNotFoundError, BackendUnavailableError, KernelCompileError,
                             PluginError, UnsupportedError)
from evt_core.plugin import manager

from .common import Row, against_reference, bias_tree, clean_inputs, env, operands

def _compile_with(backend="numpy", **variables):
    with env(**variables):
        return evt_core.compile(bias_tree(), backend)

def _run_with(**variables):
    """(result, reference) with the environment set around trace, compile and call."""
    with env(**variables):
        evt_core.api._kernels.clear()
        A, B = operands()
        return against_reference("numpy", bias_tree(), A, B, clean_inputs())

class _Raising(Backend):
    """A plugin backend whose methods raise plain exceptions (a buggy plugin)."""
    name = "raising"
    fail = "available"

    def available(self):
        if self.fail == "available":
            raise OSError("driver library exploded")
        return Support.yes()

    def compile(self, tree, options):
        raise RuntimeError("generator bug")

class _Dup(Backend):
    name = "numpy"

    def available(self):
        return Support.yes()

    def compile(self, tree, options):
        return Kernel(self.name, tree, None)

def _with_backend(cls, fail="available"):
    p = manager.plugins()
    cls.fail = fail
    p.registry._backends[cls.name] = cls()
    try:
        return evt_core.compile(bias_tree(), cls.name)
    finally:
        p.registry._backends.pop(cls.name, None)

def _duplicate():
    manager.plugins().registry.add(_Dup)

def _extra_plugin(module, then, quiet=True):
    """Load the built-in plugins plus `module` (as plugin "extra"), then call then()."""
    saved = manager.DEFAULT_PLUGINS
    manager.DEFAULT_PLUGINS = saved + (("extra", module),)
    try:
        with env():
            with warnings.catch_warnings():
                if quiet:
                    warnings.simplefilter("ignore", RuntimeWarning)
                manager.plugins()
            return then()
    finally:
        manager.DEFAULT_PLUGINS = saved
        manager.reset_plugins()


def _numpy_still_works():
    evt_core.api._kernels.clear()
    A, B = operands()
    return against_reference("numpy", bias_tree(), A, B, clean_inputs())

def _cache_after(damage):
    """Store an entry, damage it, read it back: must be one warning and a miss."""
    with tempfile.TemporaryDirectory() as d, env(EVT_CACHE_DIR=d):
        cache.reset()
        c, key = DiskCache("rows"), "e" * 32
        c.put(key, {".cubin": os.urandom(512)}, {"entry": "k"})
        damage(os.path.join(d, "rows"), key)
        assert c.get(key) is None
        cache.reset()

def _data(d, key):
    return os.path.join(d, next(n for n in os.listdir(d) if n.startswith(key + "-")))

def _truncate(d, key):
    with open(_data(d, key), "r+b") as f:
        f.truncate(100)

def _random_manifest(d, key):
    with open(os.path.join(d, f"{key}.json"), "wb") as f:
        f.write(os.urandom(200))

def _dir_instead(d, key):
    p = _data(d, key)
    os.unlink(p)
    os.mkdir(p)

def _cache_dir(value, make_file=False):
    with tempfile.TemporaryDirectory() as d:
        if make_file:
            value = os.path.join(d, "a-file")
            open(value, "w").close()
        with env(EVT_CACHE_DIR=value):
            cache.reset()
            DiskCache("rows").put("f" * 32, {".x": b"1"})
            assert DiskCache("rows").get("f" * 32) == ({}, {".x": b"1"})
            cache.reset()

def _namespace_is_a_file():
    """$EVT_CACHE_DIR is fine but its numba/ is a file: writes warn once, reads miss."""
    with tempfile.TemporaryDirectory() as d, env(EVT_CACHE_DIR=d):
        cache.reset()
        open(os.path.join(d, "rows"), "w").close()
        for _ in range(2):
            DiskCache("rows").put("f" * 32, {".x": b"1"})
            assert DiskCache("rows").get("f" * 32) is None
        cache.reset()


def _dump_into_file():
    with tempfile.NamedTemporaryFile() as f, env(EVT_DUMP=f.name):
        evt_core.api._kernels.clear()
        A, B = operands()
        return against_reference("numpy", bias_tree(), A, B, clean_inputs())

ROWS = [
    Row("disabled-backend-named", lambda: _compile_with(EVT_DISABLE_PLUGINS="numpy"), BackendNotFoundError,
        "'numpy' is disabled by EVT_DISABLE_PLUGINS"),
    Row("disabled-backend-not-did-you-mean", lambda: _compile_with(EVT_DISABLE_PLUGINS="numpy,cupy"),
        BackendNotFoundError, "remove it from that variable"),
    Row("disable-unknown-name", lambda: _run_with(EVT_DISABLE_PLUGINS="nmupy"), RuntimeWarning, "'nmupy'"),
    Row("disable-with-spaces", lambda: _compile_with(EVT_DISABLE_PLUGINS=" numpy , cupy"), BackendNotFoundError,
        "disabled"),
    Row("auto-with-nothing-available", lambda: _compile_with("auto", EVT_DISABLE_PLUGINS="numpy,numba_cuda,cupy"),
        BackendUnavailableError, "backend='auto' found no available backend"),
    Row("auto-names-the-disabled", lambda: _compile_with("auto", EVT_DISABLE_PLUGINS="numpy,numba_cuda,cupy"),
        BackendUnavailableError, "EVT_DISABLE_PLUGINS disables numpy"),
    Row("backend-None", lambda: _compile_with(None), BackendNotFoundError, "got NoneType None"),
    Row("backend-int", lambda: _compile_with(3), BackendNotFoundError, "got int 3"),
    Row("backend-typo", lambda: _compile_with("NumPy"), BackendNotFoundError, "did you mean 'numpy'"),
    Row("backend-unknown", lambda: _compile_with("tpu"), BackendNotFoundError, "no backend named 'tpu'"),
    Row("option-unknown", lambda: evt_core.compile(bias_tree(), "numpy", fast=True), UnsupportedError, "'fast'"),
    Row("option-bool-given-a-string", lambda: evt_core.compile(bias_tree(), "numba_cuda", deterministic="no"),
        ArgumentError, "deterministic='no'"),
    Row("option-typo", lambda: evt_core.compile(bias_tree(), "numba_cuda", determinstic=True), UnsupportedError,
        "'determinstic'"),
    Row("plugin-available-raises", lambda: _with_backend(_Raising, "available"), KernelCompileError,
        "raising: available() failed"),
    Row("plugin-compile-raises", lambda: _with_backend(_Raising, "compile"), KernelCompileError,
        "raising: compile failed: RuntimeError: generator bug"),
    Row("plugin-registers-a-taken-name", _duplicate, PluginError, "'numpy' registered twice"),
    Row("plugin-fails-to-import", lambda: _extra_plugin("evt_no_such_module.plugin",
                                                        lambda: evt_core.compile(bias_tree(), "extra")),
        BackendNotFoundError, "the plugin for 'extra' failed to load"),
    Row("plugin-registration-raises", lambda: _extra_plugin(f"{__package__}.plugin_raises",
                                                            lambda: evt_core.compile(bias_tree(), "extra")),
        BackendNotFoundError, "registration exploded"),
    Row("plugin-registration-raises-others-work",
        lambda: _extra_plugin(f"{__package__}.plugin_raises", _numpy_still_works, quiet=False),
        RuntimeWarning, "plugin 'extra' failed to register its backends"),
    Row("plugin-registers-numpy-again", lambda: _extra_plugin(f"{__package__}.plugin_duplicate",
                                                              _numpy_still_works, quiet=False),
        RuntimeWarning, "'numpy' registered twice"),
    Row("env-verify-typo", lambda: _run_with(EVT_VERIFY="yes"), RuntimeWarning, "EVT_VERIFY='yes'"),
    Row("env-poison-typo", lambda: _run_with(EVT_POISON="true"), RuntimeWarning, "EVT_POISON='true'"),
    Row("env-trace-plugins-typo", lambda: _run_with(EVT_TRACE_PLUGINS="2"), RuntimeWarning, "EVT_TRACE_PLUGINS='2'"),
    Row("env-poison-on-is-valid", lambda: _run_with(EVT_POISON="1"), None),
    Row("env-dump-is-a-file", _dump_into_file, RuntimeWarning, "EVT_DUMP="),
    Row("cache-dir-empty-string", lambda: _cache_dir(""), CacheWarning, "EVT_CACHE_DIR is set but empty"),
    Row("cache-dir-names-a-file", lambda: _cache_dir(None, make_file=True), CacheWarning, "names a file"),
    Row("cache-dir-under-a-file", lambda: _cache_dir("/dev/null/evt"), CacheWarning, "'/dev/null/evt'"),
    Row("cache-namespace-is-a-file", _namespace_is_a_file, CacheWarning, "cannot write the compile cache"),
    Row("cache-entry-truncated", lambda: _cache_after(_truncate), CacheWarning, "eeee"),
    Row("cache-entry-random-manifest", lambda: _cache_after(_random_manifest), CacheWarning, "corrupt cache entry"),
    Row("cache-entry-replaced-by-directory", lambda: _cache_after(_dir_instead), CacheWarning, "IsADirectoryError"),
]

