"""RESULTS.md formatting and the per-round ratios, on hand-made results (no GPU, no torch)."""
import json

from bench.report import markdown, paired_ratio, rows, table, write_results


def _cand(name, mode, rounds, status="ok", reason="", **kw):
    return {"name": name, "mode": mode, "status": status, "reason": reason, "errors": {}, "compile_s": None,
            "round_us": rounds, "wall_us": None, "note": "", **kw}


def _results():
    case = {"workload": "W1", "title": "forward", "shape": [8192, 3072, 768], "flops": 2.0 * 8192 * 3072 * 768,
            "candidates": [
                _cand("cuBLAS", "library", [60.0, 66.0, 63.0]),
                _cand("eager", "library", [120.0, 132.0, 126.0]),
                _cand("torch.compile", "library", [90.0, 99.0, 94.5], compile_s=41.2),
                _cand("numba_cuda", "call", [75.0, 82.5, 78.75], note="numba arrays"),
                _cand("cupy", "call", [], status="wrong", reason="z: rel L2 error 3.1e-01 > 5e-03"),
                _cand("triton_evt", "call", [], status="unavailable", reason="no GPU"),
            ]}
    skipped = {"workload": "W2", "title": "backward", "shape": [8192, 3072, 768], "flops": 1.0,
               "candidates": [], "skipped": "time budget of 300 s exhausted at 301 s"}
    meta = {"date": "2026-11-29 17:00 UTC", "device": "NVIDIA H200", "command": "python3 -m bench.run --quick",
            "versions": {"torch": "2.11.0"}, "rounds": 3, "warmup_ms": 10, "rep_ms": 40}
    return {"meta": meta, "cases": [case, skipped]}


def test_ratios_are_per_round_medians():
    # The candidate is exactly 1.25x cuBLAS in every round although both drift by 10%.
    cand, base = _cand("x", "call", [75.0, 82.5, 78.75]), _cand("cuBLAS", "library", [60.0, 66.0, 63.0])
    assert paired_ratio(cand, base) == 1.25
    assert paired_ratio(cand, _cand("cuBLAS", "library", [])) is None


def test_rows_derive_time_tflops_and_ratios():
    r = {row["name"]: row for row in rows(_results()["cases"][0])}
    assert r["numba_cuda"]["time_us"] == 78.75
    assert abs(r["numba_cuda"]["tflops"] - 2.0 * 8192 * 3072 * 768 / 78.75e-6 / 1e12) < 1e-9
    assert r["numba_cuda"]["x_cuBLAS"] == 1.25
    assert abs(r["numba_cuda"]["x_eager"] - 78.75 / 126.0) < 1e-12
    assert r["cupy"]["time_us"] is None and r["cupy"]["x_cuBLAS"] is None


def test_table_names_every_failure_and_skip():
    text = table(_results())
    assert "| W1 | 8192×3072×768 | numba_cuda | call | 78.8 |" in text
    assert "**wrong**: z: rel L2 error" in text
    assert "**unavailable**: no GPU" in text
    assert "**not measured**: time budget" in text
    assert "compile 41.2 s" in text


def test_markdown_header_has_date_device_command_versions():
    text = markdown(_results())
    for needle in ("2026-11-29", "NVIDIA H200", "python3 -m bench.run --quick", "torch 2.11.0", "3 interleaved"):
        assert needle in text


def test_write_results_writes_table_and_json(tmp_path):
    write_results(_results(), tmp_path)
    assert json.loads((tmp_path / "results.json").read_text())["meta"]["device"] == "NVIDIA H200"
    assert "| W1 |" in (tmp_path / "RESULTS.md").read_text()
