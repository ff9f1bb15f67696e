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
