"""bench/step_timeline.py's accounting of a timeline (the GPU part runs on the device)."""
from bench.step_timeline import summary


def test_gaps_busy_time_and_overlap_are_counted_once():
    acts = [(0.0, 10.0, "kernel", "gemm"), (12.0, 5.0, "gpu_memset", "zero"),
            (30.0, 10.0, "kernel", "epilogue"), (35.0, 2.0, "kernel", "inside")]   # the last overlaps
    text = "\n".join(summary("evt", acts, top=5))
    assert "span 40.0 µs, GPU busy 25.0 µs, idle 15.0 µs in 2 gaps" in text
    assert "(2.0 µs in gaps under 5 µs, 13.0 in longer ones)" in text
    assert "2 kernel" not in text and "3 kernel, 1 gpu_memset, 0 gpu_memcpy" in text
    rows = [line for line in text.splitlines() if line.startswith("| 1")]
    assert rows == ["| 13.0 | zero (5.0) | epilogue (10.0) |"]      # the longest gap first, with its neighbours


def test_an_empty_trace_says_so():
    assert "no GPU activity recorded" in "\n".join(summary("evt", [], top=3))
