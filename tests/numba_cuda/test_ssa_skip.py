"""runtime/ssa_skip.py: numba's SSA reconstruction is skipped only while a build runs, and a
kernel built without it has the same SASS instructions as one built with it (CPU only: numba
builds, nvJitLink links, the cuobjdump wheel disassembles)."""
import collections
import contextlib
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

# one of each kind of generated kernel: the ping-pong and cooperative sm_90a kernels, (M, N)
# inputs through the ring, deterministic reductions, the overlapped schedule, 128 x 256 tiles
# (the others of tests/numba_cuda/sm90_kernels.py were compared once, 2026-12-07: the same
# instructions in all 26, and in W0-W4's mma.sync kernels)
SM90_KERNELS = ("pingpong_reductions", "frag_ring_layernorm_stats", "overlap_gelu_backward")


@pytest.fixture(scope="module")
def tools(tmp_path_factory):
    from sm90_kernels import require_build_tools
    require_build_tools(tmp_path_factory, "cache-ssa")
    from evt_backends.numba_cuda.runtime import build as nb
    from evt_backends.numba_cuda.runtime import ssa_skip
    return nb, ssa_skip


def _opcodes(nb, built):
    return collections.Counter(nb.sass_opcodes(built.image, modifiers=True))


def test_skipped_only_inside_a_build(tools):
    from numba.cuda.flags import CUDAFlags
    _, ssa_skip = tools
    assert CUDAFlags().enable_ssa is True
    with ssa_skip.skipped():
        assert CUDAFlags().enable_ssa is False
        flags = CUDAFlags()
        flags.enable_ssa = True            # a function that asks for SSA still gets it
        assert flags.enable_ssa is True
    assert CUDAFlags().enable_ssa is True


def test_another_thread_keeps_ssa_during_a_build(tools):
    import threading
    from numba.cuda.flags import CUDAFlags
    _, ssa_skip = tools
    seen = []
    with ssa_skip.skipped():
        worker = threading.Thread(target=lambda: seen.append(CUDAFlags().enable_ssa))
        worker.start()
        worker.join(timeout=30)
        assert CUDAFlags().enable_ssa is False
    assert seen == [True]


@pytest.mark.parametrize("name", SM90_KERNELS)
def test_sm90_kernel_has_the_same_instructions_without_ssa(tools, name, monkeypatch):
    import sm90_kernels
    nb, ssa_skip = tools
    skipped = sm90_kernels.build(name)     # built by test_sm90_codegen already, in one process
    del sm90_kernels._built[name]
    nb._memory.clear()
    monkeypatch.setattr(ssa_skip, "skipped", contextlib.nullcontext)
    monkeypatch.setattr(nb, "_from_disk", lambda key: None)
    with_ssa = sm90_kernels.build(name)
    sm90_kernels._built[name] = skipped
    assert with_ssa.image != b"" and _opcodes(nb, skipped) == _opcodes(nb, with_ssa)


def test_mma_kernel_has_the_same_instructions_without_ssa(tools, monkeypatch):
    from bench import programs as P
    from bench.numba_build_time import _sources
    nb, ssa_skip = tools
    variant, body, params, _ = next(_sources(P.w2_backward()))
    assert variant == "mma.sync"
    key = nb.cache_key("test_ssa_skip", body)
    skipped = nb.build(key, body, "evt_kernel", params)
    nb._memory.clear()
    monkeypatch.setattr(ssa_skip, "skipped", contextlib.nullcontext)
    monkeypatch.setattr(nb, "_from_disk", lambda key: None)
    with_ssa = nb.build(key, body, "evt_kernel", params)
    nb._memory.clear()
    assert _opcodes(nb, skipped) == _opcodes(nb, with_ssa)
