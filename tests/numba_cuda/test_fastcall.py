"""The repeated-call path (fastcall.py) launches exactly what the fully checked path launches:
on the CPU, with the driver, the kernels and torch's CUDA tensors replaced by recorders, two
calls with one signature give the same grid and the same parameter values except the output
pointers and the scalar that changed. Calls that change a shape, a dtype, or pass a scalar of
another type take the full path again."""
import numpy as np
import pytest

import evt_core
from evt_core import ops

torch = pytest.importorskip("torch")


class FakeCuda:
    """A CUDA torch tensor as the backend sees it: shape, stride(), dtype, data_ptr()."""
    __module__ = "torch.fake"
    is_cuda, device = True, "cuda:0"
    next_ptr = [1 << 20]

    def __init__(self, shape, dtype, strides=None):
        self.shape, self.dtype = torch.Size(shape), dtype
        if strides is None:
            strides, step = [], 1
            for e in reversed(shape):
                strides.insert(0, step)
                step *= e
        self._strides = tuple(strides)
        FakeCuda.next_ptr[0] += 1 << 16
        self._ptr = FakeCuda.next_ptr[0]

    def stride(self):
        return self._strides

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return 4 if self.dtype == torch.float32 else 2

    def fill_(self, value):
        pass


LAUNCHES = []     # module-wide: a compiled kernel (cached across tests) keeps its recorder


@pytest.fixture
def recorded(monkeypatch):
    from evt_backends.gpu import cuda, streams
    from evt_backends.numba_cuda import backend, runner
    from evt_backends.numba_cuda.runtime import arrays, driver, fastcall
    from evt_core.backend import Support
    launches = LAUNCHES
    launches.clear()

    class Fn:
        def launch(self, grid, block, values, stream=0):
            launches.append((grid, tuple(values)))

        def head(self, grid, block):
            return (None, *grid, *block, 0)

        def replay(self, head, base, changed, new, stream, owner):
            values = list(base)
            for i, v in zip(changed, new):
                values[i] = v
            launches.append((head[1:4], tuple(values)))

    class Buffer:
        def __init__(self, nbytes):
            self.nbytes, self.ptr = nbytes, 0xABC000

    class Lib:
        def __getattr__(self, name):
            return lambda *a: 0
    names = {"float16": torch.float16, "float32": torch.float32, "bfloat16": torch.bfloat16}
    monkeypatch.setattr(backend.NumbaCudaBackend, "available", lambda self: Support.yes())
    monkeypatch.setattr(cuda, "lib", lambda backend="gpu": Lib())
    monkeypatch.setattr(streams, "current_stream", lambda side: 0)
    monkeypatch.setattr(streams, "stream_getter", lambda side: int)
    # the replay asks capture_query(side)'s function (torch's query: a dummy in a CPU build);
    # here it asks streams.capturing, which the tests replace
    monkeypatch.setattr(streams, "capture_query", lambda side: lambda stream: streams.capturing(stream))
    monkeypatch.setattr(runner.Runner, "function", lambda self, variant: {"main": Fn()})
    monkeypatch.setattr(runner.Runner, "finish_function", lambda self: Fn())
    monkeypatch.setattr(arrays, "allocator", lambda side, like: lambda shape, dt, st: arrays.view(
        FakeCuda(shape, names[dt], st), "torch", "output"))
    monkeypatch.setattr(fastcall, "_maker", lambda side, spec, device: lambda: FakeCuda(spec[0], spec[2], spec[1]))
    monkeypatch.setattr(driver, "memset32", lambda *a: None)
    monkeypatch.setattr(driver, "DeviceBuffer", Buffer)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    return launches


def _kernel(M, N, mean=False):
    """S: a column sum into fp32, which the kernel's atomics write directly (no finish kernel);
    mean=True: a column mean, which the finish kernel divides."""
    def epi(accum, bias, alpha):
        y = ops.relu(alpha * accum + bias)
        return {"D": y, "S": ops.mean(y, over="M") if mean else ops.sum(y, over="M")}
    ex = {"accum": np.empty((M, N), np.float32), "bias": np.zeros(N, np.float32), "alpha": 1.0,
          "D": np.empty((M, N), np.float16), "S": np.empty(N, np.float32)}
    return evt_core.compile(evt_core.trace(epi, ex), backend="numba_cuda")


def test_fast_path_launches_what_the_checked_path_launches_direct_reduction(recorded, monkeypatch):
    """A direct reduction: one launch per call, the column sum's output is the kernel's
    workspace argument, rewritten per call like the other outputs; the finish kernel, which
    no call launches, is never built (a numba build saved from the first call)."""
    from evt_backends.numba_cuda import runner

    def no_build(self):
        raise AssertionError("the finish kernel was built for a call with only direct reductions")
    monkeypatch.setattr(runner.Runner, "finish_function", no_build)
    M, N, K = 96, 64, 32
    kernel = _kernel(M, N)
    A, B, bias = FakeCuda((M, K), torch.float16), FakeCuda((K, N), torch.float16), FakeCuda((N,), torch.float32)
    first = kernel(A, B, bias=bias, alpha=0.5)
    g1, main1 = recorded[-1]
    second = kernel(A, B, bias=bias, alpha=0.25)
    g2, main2 = recorded[-1]
    assert len(recorded) == 2 and g1 == g2      # no finish kernel
    scalar, out_ptr, red_ptr = main1.index(0.5), main1.index(first["D"].data_ptr()), main1.index(first["S"].data_ptr())
    assert [i for i, (a, b) in enumerate(zip(main1, main2)) if a != b] == sorted([scalar, out_ptr, red_ptr])
    assert main2[red_ptr] == second["S"].data_ptr() and main2[out_ptr] == second["D"].data_ptr()


def test_fast_path_launches_what_the_checked_path_launches(recorded):
    M, N, K = 96, 64, 32
    kernel = _kernel(M, N, mean=True)
    A, B, bias = FakeCuda((M, K), torch.float16), FakeCuda((K, N), torch.float16), FakeCuda((N,), torch.float32)
    first = kernel(A, B, bias=bias, alpha=0.5)
    slow = recorded[-2:]
    second = kernel(A, B, bias=bias, alpha=0.25)
    fast = recorded[-2:]
    assert sorted(first) == sorted(second) == ["D", "S"]
    (g1, main1), (f1, fin1) = slow
    (g2, main2), (f2, fin2) = fast
    assert g1 == g2 and f1 == f2
    scalar = main1.index(0.5)
    out_ptr = main1.index(first["D"].data_ptr())
    assert [i for i, (a, b) in enumerate(zip(main1, main2)) if a != b] == [scalar, out_ptr]
    assert main2[scalar] == 0.25 and main2[out_ptr] == second["D"].data_ptr()
    red_ptr = fin1.index(first["S"].data_ptr())
    assert [i for i, (a, b) in enumerate(zip(fin1, fin2)) if a != b] == [red_ptr]


def test_other_signatures_take_the_checked_path(recorded):
    from evt_core.errors import ShapeError
    M, N, K = 96, 64, 32
    kernel = _kernel(M, N)
    A, B, bias = FakeCuda((M, K), torch.float16), FakeCuda((K, N), torch.float16), FakeCuda((N,), torch.float32)
    kernel(A, B, bias=bias, alpha=0.5)
    with pytest.raises(ShapeError, match="bias"):            # a wrong shape is still caught
        kernel(A, B, bias=FakeCuda((N + 1,), torch.float32), alpha=0.5)
    kernel(A, B, bias=bias, alpha=np.float32(0.25))          # a NumPy scalar: the checked path
    assert 0.25 in recorded[-1][1]
    A2 = FakeCuda((M + 32, K), torch.float16)                 # a new problem size binds afresh
    out = kernel(A2, B, bias=bias, alpha=0.5)
    assert tuple(out["D"].shape) == (M + 32, N)


def test_sm90_fast_path_refills_the_tensor_maps(recorded, monkeypatch):
    """The sm_90a kernel's tensor maps embed A's, B's and (fragment epilogue) the outputs'
    addresses: a replayed call with new operands passes the maps of the new addresses, encoded
    once per address triple."""
    from evt_backends.gpu import streams, tensormap
    from evt_backends.numba_cuda.runtime import driver, launch_sm90
    buffers = iter(range(0x100000, 0x200000, 0x1000))

    class Slots:         # runtime/map_slots.py has its own test; here: one slot per call key
        def __init__(self, maps):
            self.slots, self.maps, self.recycles = {}, maps, 0

        def pointers(self, key, encode, stream, capturing):
            if key not in self.slots:
                encode()
                self.slots[key] = next(buffers)
            return tuple(self.slots[key] + 128 * i for i in range(self.maps))
    encoded = []
    monkeypatch.setattr(launch_sm90, "_slots", {})
    monkeypatch.setattr(launch_sm90, "MapSlots", Slots)
    monkeypatch.setattr(driver, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(launch_sm90, "watchdog_pointer", lambda: 0x77)
    monkeypatch.setattr(tensormap, "encode", lambda ptr, *a, **k: encoded.append(ptr) or ptr.to_bytes(128, "little"))
    from evt_backends.numba_cuda.runtime import fastcall
    pooled = {}     # replays get D's block back each time, as from torch's caching allocator
    monkeypatch.setattr(fastcall, "_maker", lambda side, spec, device: lambda: pooled.setdefault(
        spec, FakeCuda(spec[0], spec[2], spec[1])))
    M, N, K = 256, 128, 64
    kernel = _kernel(M, N)
    B, bias = FakeCuda((K, N), torch.float16), FakeCuda((N,), torch.float32)
    A1, A2 = FakeCuda((M, K), torch.float16), FakeCuda((M, K), torch.float16)
    kernel(A1, B, bias=bias, alpha=0.5)
    assert kernel.stages["sm90"].startswith("sm_90a warp-specialised kernel")
    assert "TMA-stored outputs" in kernel.stages["sm90"]      # D: one more map, for its stores
    first, n1 = recorded[-1][1], len(encoded)      # (S is direct: no finish kernel)
    kernel(A2, B, bias=bias, alpha=0.5)          # the replay path, new A
    second, n2 = recorded[-1][1], len(encoded)
    pos = len(first) - 6                          # A map, B map, D map, watchdog, tiles_m, tiles_n
    assert second[0] == A2.data_ptr() and second[pos] != first[pos] and second[pos + 1] != first[pos + 1]
    assert first[pos + 3:] == second[pos + 3:] == (0x77, 2, 1)
    # the replay's maps are those of its own A, B and newly allocated D, encoded once
    d2 = second[12 + 4 + 1]                       # D's pointer: after A, B, the problem, bias, alpha
    assert encoded[n1:n2] == [A2.data_ptr(), B.data_ptr(), d2]
    # the same addresses again: the same maps, with no new encoding
    kernel(A2, B, bias=bias, alpha=0.5)
    third, n3 = recorded[-1][1], len(encoded)
    assert n3 == n2 and third[pos:pos + 3] == second[pos:pos + 3]
    # inside a capture the slots are asked again (a captured call's slot becomes the graph's)
    asked = []
    slots = launch_sm90._slots[3]
    monkeypatch.setattr(slots, "pointers", lambda key, *a, _p=slots.pointers: asked.append(a[2]) or _p(key, *a))
    monkeypatch.setattr(streams, "capturing", lambda stream: True)
    kernel(A2, B, bias=bias, alpha=0.5)
    assert asked == [True] and recorded[-1][1][pos:pos + 3] == second[pos:pos + 3]
    monkeypatch.setattr(streams, "capturing", lambda stream: False)
    kernel(A2, B, bias=bias, alpha=0.5)          # eager again: the remembered answer
    assert asked == [True]
    slots.recycles += 1                           # eager slots taken back: ask again
    kernel(A2, B, bias=bias, alpha=0.5)
    assert asked == [True, False] and len(encoded) == n2


def test_sm90_wide_tile_launch(recorded, monkeypatch):
    """A call select gives the 128 x 256 tile (a weight gradient's M-major A, K-major B, a plain
    store, K >= 4096 and 96 wide tiles on 132 SMs): the variant key ends in 256, the grid is one
    CTA per SM, the kernel's tile counts are ceil(M / 128) and ceil(N / 256), B's map has the
    256-row box, and the replay launches the same."""
    from evt_backends.gpu import streams, tensormap
    from evt_backends.numba_cuda import runner
    from evt_backends.numba_cuda.runtime import driver, launch_sm90
    variants, boxes = [], []
    fake_function = runner.Runner.function
    monkeypatch.setattr(runner.Runner, "function", lambda self, v: variants.append(v) or fake_function(self, v))

    class Slots:
        def __init__(self, maps):
            self.maps, self.recycles = maps, 0

        def pointers(self, key, encode, stream, capturing):
            encode()
            return tuple(0x100000 + 128 * i for i in range(self.maps))
    monkeypatch.setattr(launch_sm90, "_slots", {})
    monkeypatch.setattr(launch_sm90, "MapSlots", Slots)
    monkeypatch.setattr(driver, "compute_capability", lambda: (9, 0))
    monkeypatch.setattr(launch_sm90, "sm_count", lambda: 132)
    monkeypatch.setattr(launch_sm90, "watchdog_pointer", lambda: 0x77)
    monkeypatch.setattr(tensormap, "encode",
                        lambda ptr, dtype, dims, strides, box, **k: boxes.append(box) or bytes(128))
    monkeypatch.setattr(streams, "capturing", lambda stream: False)
    M, N, K = 3000, 1000, 4104          # (a K-major B needs K % 8 == 0)
    tree = evt_core.trace(lambda accum: {"D": accum}, {"accum": np.empty((M, N), np.float32),
                                                        "D": np.empty((M, N), np.float16)})
    kernel = evt_core.compile(tree, backend="numba_cuda")
    A, B = FakeCuda((M, K), torch.float16, (1, M)), FakeCuda((K, N), torch.float16, (1, K))
    kernel(A, B)
    assert variants[-1][0] == "sm90" and variants[-1][9] == 256, (variants, kernel.stages.get("sm90"))
    assert "tile 128x256x64" in kernel.stages["sm90"] and "A M-major, B K-major" in kernel.stages["sm90"]
    assert boxes[-3:] == [(64, 64), (64, 256), (64, 64)]     # A's panels, B's 256-row box, D's store panels
    grid, values = recorded[-1]
    assert grid == (96, 1, 1) and values[-3:] == (0x77, 24, 4)
    kernel(A, B)                                             # the replay path
    assert recorded[-1][0] == grid and recorded[-1][1][-3:] == (0x77, 24, 4)

def test_launch_rewrites_only_changed_slots_while_the_owner_is_the_last_writer():
    """driver.Function keeps one ctypes slot per parameter: a replay (owner) rewrites only the
    positions it changes, unless another call filled the slots in between."""
    import ctypes
    from evt_backends.numba_cuda.runtime import driver
    fn = object.__new__(driver.Function)
    fn._slots = [ctypes.c_int64() for _ in range(4)]
    fn._ptrs, fn._fn, fn._owner, fn.dynamic_shared = None, None, None, 0
    fn._stream = fn._stream_arg = None
    seen = []
    fn._launch = lambda *a: seen.append([s.value for s in fn._slots]) or 0
    a, b = object(), object()
    head = fn.head((1, 1, 1), (1, 1, 1))
    fn.replay(head, [1, 2, 3, 4], [0], [1], 0, a)
    fn.replay(head, [1, 99, 99, 99], [0], [9], 0, a)       # a replay: position 0 only
    fn.replay(head, [5, 6, 7, 8], [0], [5], 0, b)          # another owner: everything
    fn.replay(head, [1, 2, 3, 4], [0], [10], 0, a)         # a again, after b: everything
    fn.launch((1, 1, 1), (1, 1, 1), [11, 2, 3, 4])         # the checked path: everything
    assert seen == [[1, 2, 3, 4], [9, 2, 3, 4], [5, 6, 7, 8], [10, 2, 3, 4], [11, 2, 3, 4]]
    assert fn._owner is None


def test_the_hook_replays_before_normalisation_and_declines_bad_calls(recorded, monkeypatch):
    """Kernel.__call__'s hook (Runner.fast_call) replays a matching call of CUDA tensors and
    Python floats without normalize_call; anything else takes the checked path, so a bad
    argument still gets its typed error and an int scalar is normalised, then replayed."""
    from evt_core import backend as core_backend
    from evt_core.errors import ArgumentError, ShapeError
    from evt_backends.numba_cuda.runtime import fastcall
    normalised, replays = [], []
    real_norm, real_run = core_backend.normalize_call, fastcall.FastCall.run
    monkeypatch.setattr(core_backend, "normalize_call", lambda *a, **k: normalised.append(1) or real_norm(*a, **k))
    monkeypatch.setattr(fastcall.FastCall, "run", lambda self, *a: replays.append(1) or real_run(self, *a))
    M, N, K = 112, 48, 40          # a signature no other test (sharing the runner) has replayed
    kernel = _kernel(M, N)
    A, B, bias = FakeCuda((M, K), torch.float16), FakeCuda((K, N), torch.float16), FakeCuda((N,), torch.float32)
    kernel(A, B, bias=bias, alpha=0.5)                      # the checked path records the signature
    assert (len(normalised), len(replays)) == (1, 0)
    kernel(A, B, bias=bias, alpha=0.25)                     # the hook: no normalisation
    assert (len(normalised), len(replays)) == (1, 1) and recorded[-1][1].count(0.25) == 1
    kernel(A, B, bias=bias, alpha=3)                        # an int: normalised, then replayed
    assert (len(normalised), len(replays)) == (2, 2) and 3.0 in recorded[-1][1]
    for bad, error, match in [({"alpha": 1e39}, ArgumentError, "beyond float32's range"),
                              ({"alpha": True}, ArgumentError, "is the bool"),
                              ({"alpha": "0.5"}, ArgumentError, "is the string"),
                              ({"alpha": 0.5, "A": A}, ArgumentError, "both positionally"),
                              ({"alpha": 0.5, "gamma": 0.5}, ShapeError, "unexpected input 'gamma'"),
                              ({}, Exception, "alpha")]:
        with pytest.raises(error, match=match):
            kernel(A, B, bias=bias, **bad)
    assert len(replays) == 2


def test_direct_reductions_are_atomic_fp32_sums_and_maxima_in_the_workspace_layout():
    """runner.direct_reduction: the kernel's atomics go into the output itself only where the
    finish kernel would have copied the workspace unchanged into a dense fp32 output."""
    from types import SimpleNamespace as NS
    from evt_core.tree.ops import Op
    from evt_backends.numba_cuda.runner import direct_reduction

    def red(op, dtype="float32"):
        return NS(op=op, operand=NS(dtype=dtype))
    assert direct_reduction(red(Op.SUM), False, (1, 1, 64), (0, 0, 1))           # a column sum
    assert direct_reduction(red(Op.AMAX), False, (3, 96, 1), (96, 1, 0))         # batched row maxima
    assert direct_reduction(red(Op.SUM), False, (3, 1, 1), (1, 0, 0))            # a sum per batch
    assert not direct_reduction(red(Op.SUM), True, (1, 1, 64), (0, 0, 1))       # deterministic partials
    assert not direct_reduction(red(Op.MEAN), False, (1, 1, 64), (0, 0, 1))     # the finish divides
    assert not direct_reduction(red(Op.AMIN), False, (1, 1, 64), (0, 0, 1))     # the finish negates
    assert not direct_reduction(red(Op.SUM, "float16"), False, (1, 1, 64), (0, 0, 1))   # the finish rounds
    assert not direct_reduction(red(Op.SUM), False, (1, 1, 64), (0, 0, 2))      # a strided output
    assert not direct_reduction(red(Op.AMAX), False, (3, 96, 1), (128, 1, 0))   # padded batches
