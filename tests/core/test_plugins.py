"""The plugin layer: registry rules, load failures, hook dispatch, documentation."""
import inspect
import pathlib
import sys
import types

import numpy as np
import pluggy
import pytest

import evt_core
from evt_core.backend import Backend, Kernel, Support
from evt_core.errors import BackendNotFoundError, BackendUnavailableError, UnsupportedError
from evt_core.plugin import hookimpl, spec
from evt_core.plugin import manager as mgr
from tests.core.helpers import empty, ints


class Fake(Backend):
    name = "fake"
    options = {"flag": False}

    def available(self):
        return Support.yes()

    def compile(self, tree, options):
        return Kernel(self.name, tree, lambda A, B, inputs: {"D": "fake"}, options=options)


class Offline(Fake):
    name = "offline"

    def available(self):
        return Support(False, "no device here")


class Picky(Fake):
    name = "picky"

    def supports(self, tree, options):
        return Support(False, "no tanh spelling", tree.roots[0])


class FakePlugin:
    @hookimpl
    def evt_register_backends(self, registry):
        for cls in (Fake, Offline, Picky):
            registry.add(cls)


@pytest.fixture
def plugins(monkeypatch):
    mod = types.ModuleType("evt_fake_plugin")
    mod.evt_register_backends = FakePlugin().evt_register_backends
    monkeypatch.setitem(sys.modules, "evt_fake_plugin", mod)
    monkeypatch.setattr(mgr, "DEFAULT_PLUGINS", mgr.DEFAULT_PLUGINS + (("fake", "evt_fake_plugin"),
                                                                       ("broken", "evt_no_such_module")))
    mgr.reset_plugins()
    with pytest.warns(RuntimeWarning, match="broken"):
        p = mgr.plugins()
    yield p
    mgr.reset_plugins()
    evt_core.api._kernels.clear()


@pytest.fixture
def tree():
    return evt_core.trace(lambda accum: {"D": evt_core.ops.tanh(accum)}, {"accum": empty((3, 4)), "D": empty((3, 4))})


def test_registered_backend_compiles_and_options_merge(plugins, tree):
    k = evt_core.compile(tree, backend="fake", flag=True)
    assert k(ints((3, 2)), ints((2, 4))) == {"D": "fake"} and k.options == {"flag": True}


def test_duplicate_name_is_rejected_naming_both_classes(plugins):
    with pytest.raises(ValueError, match="Fake.*Fake"):
        plugins.registry.add(Fake)


def test_failed_load_surfaces_only_when_asked(plugins, tree):
    assert "broken" in evt_core.backends() and not evt_core.backends()["broken"].ok
    with pytest.raises(BackendNotFoundError, match="failed to load"):
        evt_core.compile(tree, backend="broken")


def test_unavailable_and_unsupported_carry_the_reason(plugins, tree):
    with pytest.raises(BackendUnavailableError, match="no device here"):
        evt_core.compile(tree, backend="offline")
    with pytest.raises(UnsupportedError, match="no tanh spelling") as e:
        evt_core.compile(tree, backend="picky")
    assert e.value.node is not None


def test_auto_uses_select_hook_and_compile_hook_can_intercept(plugins, tree):
    class Policy:
        @hookimpl
        def evt_select_backend(self, tree, candidates):
            return "fake"

        @hookimpl
        def evt_compile(self, tree, backend, options):
            return Kernel("intercepted", tree, lambda A, B, i: {})
    plugins.pm.register(Policy())
    assert evt_core.compile(tree, backend="auto").backend == "intercepted"


def test_misspelled_hook_fails_check_pending():
    pm = pluggy.PluginManager("evt_core")
    pm.add_hookspecs(spec)

    class Typo:
        @hookimpl
        def evt_register_backend(self, registry):
            pass
    pm.register(Typo())
    with pytest.raises(pluggy.PluginValidationError):
        pm.check_pending()


def test_disable_plugins_env(monkeypatch):
    monkeypatch.setenv("EVT_DISABLE_PLUGINS", "numpy")
    mgr.reset_plugins()
    try:
        assert "numpy" not in mgr.plugins().registry.names()
    finally:
        monkeypatch.delenv("EVT_DISABLE_PLUGINS")
        mgr.reset_plugins()


def test_every_hook_is_documented_with_its_signature():
    doc = (pathlib.Path(__file__).parents[2] / "docs" / "plugins.md").read_text()
    hooks = [n for n in dir(spec) if n.startswith("evt_")]
    assert hooks
    for name in hooks:
        params = ", ".join(inspect.signature(getattr(spec, name)).parameters)
        assert f"### {name}({params})" in doc, name


def test_numpy_backend_is_the_reference():
    t = evt_core.trace(lambda accum, b: {"D": accum + b}, {"accum": empty((3, 4)), "b": empty((4,)),
                                                          "D": empty((3, 4))})
    A, B, b = ints((3, 2)), ints((2, 4)), np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(evt_core.compile(t, backend="numpy")(A, B, b=b)["D"],
                                  evt_core.interpret(t, A, B, b=b)["D"])
