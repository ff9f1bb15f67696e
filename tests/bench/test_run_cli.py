"""bench.run's options and time budget (the GPU parts are exercised by scripts/gpu_suite.sh)."""
import pytest

from bench.run import Budget, parse_args
from bench.workloads import SHAPES


def test_defaults_measure_every_workload_and_shape():
    args = parse_args([])
    assert args.shapes == list(SHAPES) and args.workloads == ["W1", "W2", "W3", "W4"]
    assert args.rounds == 5 and not args.quick and args.backends == []


def test_quick_uses_three_rounds_unless_told():
    assert parse_args(["--quick"]).rounds == 3
    assert parse_args(["--quick", "--rounds", "4"]).rounds == 4


def test_subsets():
    args = parse_args(["--shapes", "128x256x64", "--workloads", "W3,W1", "--backends", "cupy"])
    assert args.shapes == [(128, 256, 64)] and args.workloads == ["W3", "W1"] and args.backends == ["cupy"]


@pytest.mark.parametrize("argv", [["--workloads", "W9"], ["--rounds", "0"], ["--shapes", "12x3"]])
def test_bad_options_exit_with_a_message(argv, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert "error:" in capsys.readouterr().err


def test_budget_refuses_what_would_overrun():
    b = Budget(10.0, first_case_guess=4.0)
    assert b.allows(5.0) and not b.allows(11.0)
    assert b.why_not_case() == ""


def test_budget_keeps_time_for_the_remaining_cases_before_compiling():
    b = Budget(100.0, first_case_guess=4.0)
    b.case_seconds += [10.0, 12.0]
    b.compile_seconds[(1, 2, 3)] = [30.0]
    assert b.per_case() == 11.0
    assert b.why_not_compile((1, 2, 3), cases_left=6) == ""           # 30 + 66 <= 100
    assert "7 remaining case(s)" in b.why_not_compile((1, 2, 3), cases_left=7)
    b.seconds = 5.0
    assert "a case takes ~11 s" in b.why_not_case()


def test_compile_estimate_is_per_shape():
    b = Budget(100.0, first_case_guess=4.0)
    assert b.per_compile((8, 8, 8)) == 30.0                              # nothing measured yet
    b.compile_seconds[(8, 8, 8)] = [25.0, 5.0, 6.0]                      # autotune once per shape
    assert b.per_compile((8, 8, 8)) == 6.0
    assert b.per_compile((4, 4, 4)) == 25.0                              # a new shape autotunes again
