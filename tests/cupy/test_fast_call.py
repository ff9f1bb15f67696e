"""The cupy backend's repeated call on the CPU (bench/cpu_stub.py stands in for CuPy, torch CUDA
tensors and the driver): after one checked call, a call of the same signature replays the
prepared launch (no normalisation, no bind, no CuPy launch), autotuned or not, on the stream
current at that call; a call of another signature still gets its typed error."""
import pytest

torch = pytest.importorskip("torch")

from bench import cpu_stub  # noqa: E402
from bench.launch_overhead import tiny_problem  # noqa: E402
from evt_core import backend as core_backend  # noqa: E402
from evt_core.errors import ShapeError  # noqa: E402


@pytest.mark.parametrize("options", [{}, {"autotune": False}], ids=["autotuned", "autotune=False"])
def test_repeated_call_replays_the_prepared_launch(options, monkeypatch):
    from evt_backends.cupy import runner
    from evt_backends.cupy.runtime import fast_launch
    from evt_backends.gpu import streams
    counts = {"normalize": 0, "bind": 0}
    launched_on = []
    real_norm, real_bind, real_launch = core_backend.normalize_call, runner.bind, fast_launch.launch

    def counted(name, real):
        def call(*a, **k):
            counts[name] += 1
            return real(*a, **k)
        return call
    monkeypatch.setattr(core_backend, "normalize_call", counted("normalize", real_norm))
    monkeypatch.setattr(runner, "bind", counted("bind", real_bind))
    monkeypatch.setattr(fast_launch, "launch", lambda L, stream: launched_on.append(stream) or real_launch(L, stream))
    with cpu_stub.stubbed() as cp:
        current = [7]
        streams._torch_current[:] = [lambda: current[0]]        # torch's current stream, settable
        A, B, bias, tree = tiny_problem(cpu_stub.tensor)
        kernel = cpu_stub.compile_cupy(tree, **options)
        shape = kernel(A, B, bias=bias)["D"].shape       # results dropped: their block comes back
        assert counts == {"normalize": 1, "bind": 1} and cp.launches
        cupy_launches = len(cp.launches)
        launched_on.clear()
        for stream in (7, 9):                                   # the stream is asked on every call
            current[0] = stream
            out = kernel(A, B, bias=bias)["D"]
            assert out.shape == shape and out.dtype == torch.float16
            del out
        assert counts == {"normalize": 1, "bind": 1} and len(cp.launches) == cupy_launches
        assert launched_on == [7, 9]
        with pytest.raises(ShapeError):                         # another signature: the checked path
            kernel(A, B, bias=cpu_stub.tensor((136,), torch.float32))
        assert counts["normalize"] == 2


@pytest.mark.parametrize("deterministic, mainloop", [(False, "auto"), (True, "auto"), (False, "sm80")])
def test_new_output_pointers_are_written_into_the_prepared_launch(deterministic, mainloop, monkeypatch):
    """Results kept alive give each call new output pointers: the replay writes them into its
    own launch parameters, which then equal those packed afresh for those pointers (EpiArgs,
    with a direct reduction's workspace field, and on sm90 the TMA-stored output's map)."""
    import numpy as np

    import evt_core
    from evt_core import ops
    from evt_backends.cupy.runtime import launcher
    from evt_backends.gpu import tensormap
    # a map that shows its pointer (the stub's driver writes none)
    monkeypatch.setattr(tensormap, "encode", lambda ptr, *a, **k: ptr.to_bytes(8, "little") * 16)
    M = N = K = 128

    def epi(accum, bias):
        z = accum + bias
        return {"D": ops.relu(z), "colsum": ops.sum(z, over="M")}
    tree = evt_core.trace(epi, {"accum": np.empty((M, N), np.float32), "bias": np.empty(N, np.float32),
                                "D": np.empty((M, N), np.float16), "colsum": np.empty(N, np.float32)})
    with cpu_stub.stubbed() as cp:
        A, B = cpu_stub.tensor((M, K), torch.float16), cpu_stub.tensor((K, N), torch.float16)
        bias = cpu_stub.tensor((N,), torch.float32)
        kernel = cpu_stub.compile_cupy(tree, deterministic=deterministic, mainloop=mainloop, autotune=False)
        kernel(A, B, bias=bias)
        launched = len(cp.launches)
        kept, seen = [], set()
        for _ in range(4):
            kept.append(kernel(A, B, bias=bias))
            (plan,) = kernel.run._plans.values()
            p = plan.prepared
            seen.add(tuple(p._last))
            fresh = launcher.Prepared(p.k, p.vals, p.out_pos, p.tiles, p.maps, p.max_elems, p.aliases)
            fresh.fire_on(p._last, 0)               # packed afresh, through the (stub's) CuPy launch
            assert [[bytes(a) for a in L.keep] for L in p._fast] == [[bytes(a) for a in L.keep] for L in fresh._fast]
        assert len(seen) == 4 and len(cp.launches) == launched + 4 * len(p._fast)   # only the fresh ones
