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
