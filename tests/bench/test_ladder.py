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
    assert quick.shapes == [SHAPES[0]] and quick.rounds == 3 and quick.backends == ["cupy:autotune=False"]
    assert parse_args(["--quick", "--backends", "cupy"]).backends == ["cupy"]
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
    with open(os.path.join(out, "LADDER.md")) as f:
        text = f.read()
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
    res["cases"][0]["candidates"][1]["kernel"] = "tile 128x128x64/w2x4/s6/pp"
    text = ladder_markdown(res)
    assert "| R1 | 8192×3072×768 | cupy (call) | 63.0 | 66.2 | 1.050 | 584 | tile 128x128x64/w2x4/s6/pp |" in text
    assert "**unavailable**: nvmath-python is not installed" in text


def test_kernel_choice_names_the_tile_and_schedule_an_evt_call_ran():
    from types import SimpleNamespace
    from bench.candidates import kernel_choice
    cupy = SimpleNamespace(stages={"fast_paths": "mainloop sm90, tile 128x256x64/w2x4/s4/g16\nTMA-stored outputs: y"})
    numba = SimpleNamespace(stages={"sm90": "sm_90a warp-specialised kernel: float16, tile 128x128x64, ping-pong "
                                              "schedule, A K-major, B N-major, 1536 tiles over a persistent grid"})
    fallback = SimpleNamespace(stages={"sm90": "fallback to the mma.sync kernel: K is not a multiple of 8"})
    assert kernel_choice(cupy) == "mainloop sm90, tile 128x256x64/w2x4/s4/g16"
    assert kernel_choice(numba) == "tile 128x128x64, ping-pong schedule"
    assert kernel_choice(fallback) == "fallback to the mma.sync kernel"
    assert kernel_choice(SimpleNamespace(stages={})) == "" and kernel_choice(object()) == ""


def test_gpu_path_on_cpu_torch(tmp_path, monkeypatch):
    """run_gpu's bookkeeping with torch on the CPU: timing faked, the cupy backend unregistered
    or unavailable, library anchors checked (torch._addmm_activation runs on the CPU) or
    reported unavailable."""
    torch = pytest.importorskip("torch")
    from bench import candidates, ladder, run
    from bench.workloads import Workload

    orig = Workload.torch_inputs
    monkeypatch.setattr(Workload, "torch_inputs", lambda self, M, N, K, seed=0, device="cuda":
                        tuple(x.float() if isinstance(x, torch.Tensor) else {k: v.float() for k, v in x.items()}
                              for x in orig(self, M, N, K, seed=seed, device="cpu")))
    monkeypatch.setattr(candidates, "_sync", lambda: None)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(run, "environment", lambda argv: {"date": "d", "device": "cpu", "command": "c",
                                                         "versions": {}})
    monkeypatch.setattr(run, "time_interleaved",
                        lambda cands, rounds, w, r: [c.round_us.extend([1.0] * rounds) for c in cands if c.fn])
    out = str(tmp_path / "l")
    args = ladder.parse_args(["--shapes", "64x128x32", "--rungs", "R0,R2,W1,W2", "--rounds", "2", "--quick",
                              "--backends", "nosuchbackend", "--out", out])
    res = ladder.run_gpu(args, [])
    by = {(c["workload"], cand["name"]): cand for c in res["cases"] for cand in c["candidates"]}
    assert by[("R0", "cuBLAS")]["status"] == "ok" and by[("R0", "cuBLAS")]["round_us"] == [1.0, 1.0]
    assert by[("R0", "nosuchbackend")]["status"] == "unavailable"
    assert by[("R0", "QuACK gemm")]["status"] in ("unavailable", "ok", "wrong", "error")
    addmm = by[("R2", "torch._addmm_activation (cuBLASLt GELU_BIAS)")]
    assert addmm["status"] in ("ok", "error"), addmm           # on the CPU it may lack a kernel
    assert by[("W1", "nvmath GELU_AUX_BIAS")]["status"] in ("unavailable", "error")
    assert os.path.exists(os.path.join(out, "LADDER.md"))
