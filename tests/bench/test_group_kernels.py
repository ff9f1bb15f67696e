"""bench.group_kernels on the CPU: one smoke step's evt calls are recorded with their operands."""
import pytest

pytest.importorskip("torch")


def test_smoke_step_records_every_fused_group(capsys):
    import evt_core.torch as et
    from bench import group_kernels
    et.clear_reports()
    calls = group_kernels.record_calls("bert", "float32", "numpy", smoke=True)
    (rep,) = et.reports()[-1:]
    assert len(calls) == len(rep.fused) > 0                # one call per fused group of the step
    key, A, B, ins, scalars = calls[0]
    d = group_kernels.describe(key, A, B)
    assert d["M"] == A.shape[-2] and d["K"] == A.shape[-1] == B.shape[-2] and d["results"]
    # the clones keep the operands' layouts (a weight gradient's A is a transposed view)
    assert any(c[1].stride(-1) != 1 for c in calls)


def test_kernel_choices_name_each_backends_kernel_for_a_group(monkeypatch):
    from types import SimpleNamespace
    import evt_core.torch.ops as evt_ops
    from bench.group_kernels import kernel_choices
    stages = {"k-cupy": {"fast_paths": "mainloop sm90, tile 128x128x64/w2x4/s6/pp\nTMA-loaded inputs: none"},
              "k-numba": {"sm90": "sm_90a warp-specialised kernel: float16, tile 128x256x64, cooperative schedule"}}
    monkeypatch.setattr(evt_ops, "entry", lambda key: SimpleNamespace(
        kernel=lambda device: SimpleNamespace(stages=stages[key])))
    recorded = {"cupy": [("k-cupy", None, None, (), ())], "numba_cuda": [("k-numba", None, None, (), ())]}
    assert kernel_choices(recorded, ["cupy", "numba_cuda"], 0) == \
        "cupy mainloop sm90, tile 128x128x64/w2x4/s6/pp, numba_cuda tile 128x256x64, cooperative schedule"
