"""The repeated-call way in (evt_core.backend.Kernel.__call__'s `run.fast_call` hook and
evt_core.call.fast_signature): only calls normalize_call would pass unchanged are admitted, the
hook sees only exactly-two-positional calls, and everything it declines takes the checked path
with its usual typed errors."""
import math

import numpy as np
import pytest

import evt_core
from evt_core import ops
from evt_core.backend import Kernel
from evt_core.call import FP32_MAX, fast_signature, poison_requested
from evt_core.errors import ArgumentError, ResourceError

torch = pytest.importorskip("torch")


class FakeCuda:
    """A CUDA torch tensor as fast_signature reads it."""
    __module__ = "torch.fake_cuda"
    is_cuda, device = True, "cuda:0"

    def __init__(self, shape, ptr=1 << 20, dtype=None):
        self.shape, self.dtype, self._ptr = torch.Size(shape), dtype or torch.float16, ptr
        self._strides = tuple(int(np.prod(shape[i + 1:])) for i in range(len(shape)))

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr


def _tree():
    return evt_core.trace(lambda accum, bias, alpha: {"D": ops.relu(alpha * accum + bias)},
                          {"accum": np.empty((4, 8), np.float32), "bias": np.zeros(8, np.float32), "alpha": 1.0,
                           "D": np.empty((4, 8), np.float16)})


class Recorder:
    """A backend `run` with the hook: records what each way in received."""

    def __init__(self, answer=None):
        self.answer, self.fast, self.slow = answer, [], []

    def fast_call(self, args, inputs):
        self.fast.append((args, dict(inputs)))
        return self.answer

    def __call__(self, A, B, inputs):
        self.slow.append((A, B, inputs))
        return {"D": "checked"}


def test_signature_admits_cuda_arrays_and_python_floats():
    A, B, bias = FakeCuda((4, 3), 1 << 20), FakeCuda((3, 8), (1 << 20) + 8), FakeCuda((8,), 3 << 20)
    key, values = fast_signature(A, B, {"bias": bias, "alpha": 0.5, "beta": math.inf, "gamma": math.nan})
    assert values[:4] == [1 << 20, (1 << 20) + 8, 3 << 20, 0.5] and math.isnan(values[5])
    assert key[0] == (A.shape, (3, 1), torch.float16, "cuda:0", True) and key[1][-1] is False   # B: 8-byte aligned
    assert key[2:] == (("bias", key[2][1]), "alpha", "beta", "gamma")
    # the same shapes at other addresses: one key; another shape or keyword order: another key
    again = fast_signature(FakeCuda((4, 3), 5 << 20), FakeCuda((3, 8), (6 << 20) + 8),
                           {"bias": FakeCuda((8,), 7 << 20), "alpha": 2.0, "beta": 1.0, "gamma": 0.0})
    assert again[0] == key
    assert fast_signature(A, B, {"alpha": 0.5, "bias": bias})[0] != fast_signature(A, B, {"bias": bias, "alpha": 0.5})[0]


@pytest.mark.parametrize("value", [1, True, np.float32(0.5), np.float64(0.5), "0.5", 1e39, -1e300, None,
                                   np.zeros(8, np.float32), np.ma.masked_array(np.zeros(8))])
def test_signature_declines_what_normalize_call_would_change_or_refuse(value):
    A, B = FakeCuda((4, 3)), FakeCuda((3, 8))
    assert fast_signature(A, B, {"alpha": value}) is None


def test_signature_declines_host_arrays_and_cpu_tensors():
    B = FakeCuda((3, 8))
    assert fast_signature(np.zeros((4, 3), np.float16), B, {}) is None
    assert fast_signature(torch.zeros(4, 3), B, {}) is None          # a CPU tensor: is_cuda is False
    assert fast_signature(FakeCuda((4, 3)), B, {"bias": torch.zeros(8)}) is None
    assert fast_signature(FakeCuda((4, 3)), B, {}) is not None
    assert 1e39 > FP32_MAX


def test_the_hook_sees_only_two_positional_arguments():
    rec = Recorder(answer={"D": "replayed"})
    kernel = Kernel("rec", _tree(), rec)
    A, B, bias = FakeCuda((4, 3)), FakeCuda((3, 8)), FakeCuda((8,))
    assert kernel(A, B, bias=bias, alpha=0.5) == {"D": "replayed"}
    assert rec.fast == [((A, B), {"bias": bias, "alpha": 0.5})] and rec.slow == []
    assert kernel(A=A, B=B, bias=bias, alpha=0.5) == {"D": "checked"}        # by name: the checked path
    with pytest.raises(ArgumentError, match="extra positional"):
        kernel(A, B, bias, alpha=0.5)
    assert len(rec.fast) == 1


def test_a_declined_call_gets_the_checked_paths_typed_errors():
    rec = Recorder(answer=None)         # declines everything, as a backend does without a replay
    kernel = Kernel("rec", _tree(), rec)
    A, B, bias = FakeCuda((4, 3)), FakeCuda((3, 8)), FakeCuda((8,))
    with pytest.raises(ArgumentError, match="both positionally and as A="):
        kernel(A, B, A=A, bias=bias, alpha=0.5)
    with pytest.raises(ArgumentError, match="beyond float32's range"):
        kernel(A, B, bias=bias, alpha=1e39)
    with pytest.raises(ArgumentError, match="is the bool"):
        kernel(A, B, bias=bias, alpha=True)
    with pytest.raises(ArgumentError, match="masked array"):
        kernel(A, B, bias=np.ma.masked_array(np.zeros(8, np.float32)), alpha=0.5)
    assert len(rec.fast) == 4 and rec.slow == []
    kernel(A, B, bias=bias, alpha=np.float32(2))          # normalised (to a Python float), then run
    assert rec.slow[-1][2]["alpha"] == 2.0 and type(rec.slow[-1][2]["alpha"]) is float


def test_out_of_memory_in_the_hook_is_a_resource_error():
    class Oom(Recorder):
        def fast_call(self, args, inputs):
            raise MemoryError("device")
    kernel = Kernel("oom", _tree(), Oom())
    with pytest.raises(ResourceError, match=r"out of memory for A of shape \(4, 3\)"):
        kernel(FakeCuda((4, 3)), FakeCuda((3, 8)), bias=FakeCuda((8,)), alpha=0.5)


def test_poison_follows_the_environment_on_every_call(monkeypatch):
    monkeypatch.delenv("EVT_POISON", raising=False)
    assert not poison_requested()
    monkeypatch.setenv("EVT_POISON", "1")
    assert poison_requested()
    monkeypatch.setenv("EVT_POISON", "true")       # not "1": off (bind warns about it)
    assert not poison_requested()
    monkeypatch.setenv("EVT_POISON", "0")
    assert not poison_requested()
