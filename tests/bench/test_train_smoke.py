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
    assert cases == {(w, c) for w in ("mlp", "xmlcnn", "softmax_ce", "bert") for c in ("eager", "evt (numpy)")}
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
