"""bench/train.py --smoke: every stage runs on a CPU and writes its table."""
import json

import pytest

pytest.importorskip("torch")


def test_train_benchmark_smoke(tmp_path):
    from bench.train import main
    out = tmp_path / "RESULTS-train.md"
    assert main(["--smoke", "--rounds", "1", "--rep-ms", "5", "--out", str(out)]) == 0
    text = out.read_text()
    assert "Smoke run" in text and "## Targets" in text and "- command: `python3 bench/train.py --smoke" in text
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    cases = {(r["workload"], r["candidate"]) for r in rows}
    assert cases == {(w, c) for w in ("mlp", "xmlcnn", "softmax_ce", "bert", "lm") for c in ("eager", "evt (numpy)")}
    assert all(r["status"] == "ok" and r["ms"] for r in rows), [r["status"] for r in rows]
    assert all(r["evt"]["fused"] > 0 for r in rows if r["candidate"].startswith("evt"))


def test_a_failing_candidate_is_a_row(tmp_path, monkeypatch):
    import bench.train as train

    def broken(args, device):
        def fail(model):
            raise RuntimeError("no such compiler")
        return [("eager", lambda m: m), ("broken", fail)]
    monkeypatch.setattr(train, "candidates", broken)
    out = tmp_path / "r.md"
    train.main(["--smoke", "--workloads", "mlp", "--rounds", "1", "--rep-ms", "5", "--out", str(out)])
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert [r["status"] for r in rows] == ["ok", "failed: RuntimeError: no such compiler"]
    assert "## Failures" in out.read_text()


def test_runs_combine_into_one_table(tmp_path):
    from bench.train import main
    for w in ("mlp", "xmlcnn"):
        main(["--smoke", "--workloads", w, "--rounds", "1", "--rep-ms", "5", "--out", str(tmp_path / f"{w}.md")])
    out = tmp_path / "all.md"
    assert main(["--combine", str(tmp_path / "mlp.json"), str(tmp_path / "xmlcnn.json"), "--out", str(out)]) == 0
    rows = json.loads(out.with_suffix(".json").read_text())["rows"]
    assert [r["workload"] for r in rows] == ["mlp", "mlp", "xmlcnn", "xmlcnn"]
    assert "--workloads mlp" in out.read_text() and "--workloads xmlcnn" in out.read_text()


def test_kernel_specs_carry_their_own_options(monkeypatch):
    """--kernels cupy,cupy:a_mn_major_tma=True: two evt candidates (each also with CUDA graphs),
    the second with its option on top of --evt-options, named by their options."""
    from bench import train
    import evt_core.torch as et
    seen = []
    monkeypatch.setattr(et, "backend", lambda **kw: seen.append(kw) or (lambda gm, ex: gm))
    args = train.parse_args(["--kernels", "cupy,cupy:a_mn_major_tma=True", "--evt-options", "fast_math=False",
                             "--no-inductor"])
    names = [n for n, make in train.candidates(args, "cuda")]
    assert names == ["eager", "evt (cupy, fast_math=False)", "evt (cupy, fast_math=False, CUDA graphs)",
                     "evt (cupy, fast_math=False, a_mn_major_tma=True)",
                     "evt (cupy, fast_math=False, a_mn_major_tma=True, CUDA graphs)"]
    for name, make in train.candidates(args, "cuda")[1:]:
        make(torch_module())
    assert seen[2] == {"kernels": "cupy", "fast_math": False, "a_mn_major_tma": True}
    assert seen[3] == {"kernels": "cupy", "cudagraphs": True, "fast_math": False, "a_mn_major_tma": True}


def torch_module():
    import torch
    return torch.nn.Linear(2, 2)


def test_only_keeps_eager_and_the_matching_candidates():
    from bench import train
    args = train.parse_args(["--kernels", "numba_cuda,cupy", "--whole-step", "--only", "whole-step"])
    names = [n for n, _ in train.candidates(args, "cuda")]
    assert names == ["eager", "eager (whole-step CUDA graph)",
                     "torch.compile max-autotune (no CUDA graphs) (whole-step CUDA graph)",
                     "evt (numba_cuda) (whole-step CUDA graph)", "evt (cupy) (whole-step CUDA graph)"]
