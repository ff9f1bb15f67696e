"""bench/sustained.py: nvidia-smi's samples read, the clock's ramp left out; bench.run.unpoisoned (CPU only)."""
from bench.sustained import parse_samples, steady


def test_samples_parsed_and_unmeasurable_lines_left_out():
    text = "1980, 120.5\n[N/A], [N/A]\n1845, 577.1\n\n1830,582.3\n"
    assert parse_samples(text) == [(1980.0, 120.5), (1845.0, 577.1), (1830.0, 582.3)]


def test_steady_state_skips_the_ramp():
    ramp = [(1980.0, 100.0)] * 4
    load = [(1840.0, 570.0), (1850.0, 580.0), (1830.0, 560.0)]
    assert steady(ramp + load) == (1840.0, 570.0)
    assert steady(load, settle=10) == (1840.0, 570.0)       # too few samples: all of them
    mhz, watts = steady([])
    assert mhz != mhz and watts != watts                     # NaN: nothing was sampled


def test_timing_runs_without_evt_poison(monkeypatch):
    """bench.run.unpoisoned: EVT_POISON (a NaN fill of every output before each call) is lifted
    while timing and put back after, also when the timed code raises."""
    import os

    import pytest

    from bench.run import unpoisoned
    monkeypatch.setenv("EVT_POISON", "1")
    with unpoisoned():
        assert "EVT_POISON" not in os.environ
    assert os.environ["EVT_POISON"] == "1"
    with pytest.raises(RuntimeError), unpoisoned():
        raise RuntimeError("a timing failure")
    assert os.environ["EVT_POISON"] == "1"
    monkeypatch.delenv("EVT_POISON")
    with unpoisoned():
        pass
    assert "EVT_POISON" not in os.environ
