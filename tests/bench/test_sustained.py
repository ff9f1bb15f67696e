"""bench/sustained.py: nvidia-smi's samples read, the clock's ramp left out (CPU only)."""
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
