import pytest

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """Each test compiles from scratch and sees only its own reports."""
    import evt_core.torch as et
    torch._dynamo.reset()
    et.clear_reports()
    et.register()
    yield
    torch._dynamo.reset()


@pytest.fixture
def kernel_calls(monkeypatch):
    """Counts runs of evt kernels (so a test can tell fused groups really ran)."""
    import evt_core.torch.ops as evt_ops
    calls = []
    real = evt_ops._run

    def counting(key, *args):
        calls.append(key)
        return real(key, *args)
    monkeypatch.setattr(evt_ops, "_run", counting)
    return calls
