"""bench.ladder on the CPU: options, the rungs' meaning (numpy backend) and the tables, no GPU."""
import json
import os

import pytest

from bench.ladder import ANCHORS, LADDER, ladder_markdown, main, parse_args
from bench.workloads import SHAPES


def test_defaults_and_quick():
    args = parse_args([])
    assert args.shapes == list(SHAPES) and args.rungs == list(LADDER) and args.backends == ["cupy"]
    assert args.rounds == 5
    quick = parse_args(["--quick"])
    assert quick.shapes == [SHAPES[0]] and quick.rounds == 3
    assert {"R0", "R8", "W1", "W4"} <= set(LADDER)


@pytest.mark.parametrize("argv", [["--rungs", "R99"], ["--rounds", "0"], ["--shapes", "1x2"]])
def test_bad_options(argv, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert "error:" in capsys.readouterr().err


def test_cpu_smoke_writes_json_and_tables(tmp_path, capsys):
    out = str(tmp_path / "ladder")
    assert main(["--cpu", "--shapes", "40x72x24", "--out", out]) == 0
    with open(os.path.join(out, "results.json")) as f:
        res = json.load(f)
    assert [c["workload"] for c in res["cases"]] == list(LADDER)
    for case in res["cases"]:
        evt = case["candidates"][0]
        assert evt["status"] == "ok", (case["workload"], evt["reason"])
        assert [c["name"] for c in case["candidates"][1:]] == [n for n, _ in ANCHORS.get(case["workload"], [])]
    text = open(os.path.join(out, "LADDER.md")).read()
    assert "| R5 | 40×72×24 | numpy (call) |" in text and os.path.exists(os.path.join(out, "RESULTS.md"))
    assert "Epilogue ladder" in capsys.readouterr().out


def test_ladder_table_ratios_and_unavailable_anchors():
    def cand(name, mode, rounds, status="ok", reason=""):
        return {"name": name, "mode": mode, "status": status, "reason": reason, "errors": {}, "compile_s": None,
                "round_us": rounds, "wall_us": None, "note": ""}
    res = {"meta": {"date": "d", "device": "H200", "command": "c", "rounds": 2}, "cases": [
        {"workload": "R1", "title": "bias", "shape": [8192, 3072, 768], "flops": 2.0 * 8192 * 3072 * 768,
         "candidates": [cand("cuBLAS", "library", [60.0, 66.0]), cand("cupy", "call", [63.0, 69.3]),
                        cand("nvmath X", "library", [], "unavailable", "nvmath-python is not installed")]}]}
    text = ladder_markdown(res)
    assert "| R1 | 8192×3072×768 | cupy (call) | 63.0 | 66.2 | 1.050 | 584 |" in text
    assert "**unavailable**: nvmath-python is not installed" in text
