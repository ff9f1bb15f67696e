"""bench/numba_build_time.py: one program's table rows, built on the CPU into a fresh cache."""
import pytest


def test_one_program_gives_a_row_per_kernel(monkeypatch, capsys):
    pytest.importorskip("numba.cuda")
    pytest.importorskip("cuda.bindings.nvjitlink")
    from bench import numba_build_time as bt
    monkeypatch.setattr(bt, "_PROGRAMS", ("identity",))
    monkeypatch.setenv("EVT_CACHE_DIR", "")          # main() points it at a fresh folder
    assert bt.main() == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| identity")]
    assert [r.split("|")[2].strip() for r in rows] == ["mma.sync", "sm_90a", "sm_90a staged epilogue"]
    for r in rows:
        build_s, hit_ms = float(r.split("|")[3]), float(r.split("|")[6])
        assert build_s > 0.05 and 0 < hit_ms < build_s * 1e3      # a real compile, then a hit
