#!/usr/bin/env bash
# The whole GPU suite in one command, for one call on the GPU machine:
#   1. environment (GPU, driver, package versions)           -> $OUTDIR/env.txt
#   2. GPU tests: pytest -m gpu tests/gpu properties,
#      with EVT_POISON=1 and HYPOTHESIS_PROFILE=gpu             -> $OUTDIR/gpu-tests.log
#   3. benchmark: python3 -m bench.run                        -> $OUTDIR/{RESULTS.md,results.json,plot.png,bench.log}
#   4. launch overhead of tiny calls: python3 -m bench.launch_overhead -> $OUTDIR/launch.txt
#
run_launch_probe() {   # host cost per call of tiny problems -> launch.txt
  timeout -k 5 60 python3 -m bench.launch_overhead > "$OUTDIR/launch.txt" 2>&1 || echo "launch probe failed" >> "$OUTDIR/launch.txt"
}

# With two or more GPUs the tests run on GPU 1 while the benchmark has GPU 0 (EVT_SPLIT_GPUS=0
# turns that off), so each stage gets the whole time budget.
# Usage, from the repository root:
#   scripts/gpu_suite.sh                  # full: tests, then the benchmark (all shapes, 5 rounds)
#   scripts/gpu_suite.sh --quick          # benchmark in quick mode (3 rounds, torch.compile on one shape)
#   scripts/gpu_suite.sh --skip-compile --shapes 8192x3072x768   # any other bench.run options pass through
# On a remote GPU machine: set OUT to the folder whose files you collect afterwards.
#
# Output goes to $OUT when set (the device machine), else to bench/out, and in that case RESULTS.md,
# results.json and plot.png are also copied to bench/. Every stage runs under its own time limit and
# a failing stage is logged, never fatal: the script always reaches the benchmark and finishes within
# 9 minutes (limits: EVT_TEST_SECONDS, default 190, then SIGINT so pytest still prints its summary;
# EVT_BENCH_SECONDS, default 280, the benchmark's own budget, killed 45 s after that). The
# conformance suite compiles one kernel per tree, so it runs EVT_GPU_TREES (default 6) trees per
# backend here; a dedicated run of `pytest -m gpu properties` under HYPOTHESIS_PROFILE=gpu does 300.
# Then the differential stage (run_differential): the conformance property at scale, >= 10,000
# checked examples per GPU backend (EVT_DIFF_SHARDS x EVT_DIFF_TREES trees, each at
# 1 + EVT_DIFF_SIZES problems; EVT_DIFF_SECONDS limit), counted into differential.txt;
# EVT_DIFFERENTIAL=0 skips it (and runs the property at the small scale with the tests).
# Then compute-sanitizer memcheck and racecheck over scripts/sanitize_kernels.py -> sanitizer.txt
# (EVT_SANITIZE=0 skips it). EVT_BENCH=0 skips the benchmark; EVT_TESTS=0 skips the GPU tests
# (on one GPU the tests and the differential stage together take over ten minutes; these two
# switches let each run as a command of its own).
# Exit status: 0 only if every stage passed.
set -u
cd "$(dirname "$0")/.."
OUTDIR="${OUT:-bench/out}"
mkdir -p "$OUTDIR"
TEST_SECONDS="${EVT_TEST_SECONDS:-190}"
BENCH_SECONDS="${EVT_BENCH_SECONDS:-280}"
export EVT_GPU_TREES="${EVT_GPU_TREES:-6}"
export EVT_GPU_SHARDS="${EVT_GPU_SHARDS:-1}"
# GPU tests are compile-bound (numba 5-15 s per kernel): spread them over CPU cores when
# pytest-xdist is there (EVT_TEST_WORKERS, default 8; 0 = serial).
WORKERS="${EVT_TEST_WORKERS:-8}"
XDIST=""
if [ "$WORKERS" != "0" ] && python3 -c "import xdist" 2>/dev/null; then XDIST="-n $WORKERS"; fi

# Imports: evt_core from the checkout; backends/ under its installed name evt_backends.
export PYTHONPATH="$PWD:/tmp/p${PYTHONPATH:+:$PYTHONPATH}"
mkdir -p /tmp/p && ln -sfn "$PWD/backends" /tmp/p/evt_backends
export PYTHONUNBUFFERED=1
status=0
stage() { echo "=== $(date -u +%H:%M:%S) $*" | tee -a "$OUTDIR/suite.log" >&2; }

stage "environment"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw,temperature.gpu --format=csv 2>&1
  python3 - <<'EOF' 2>&1
import importlib
for m in ("torch", "triton", "cupy", "numba", "numba_cuda", "numpy", "hypothesis", "pluggy"):
    try:
        print(m, importlib.import_module(m).__version__)
    except Exception as e:
        print(m, "unavailable:", type(e).__name__, e)
import evt_core
print("evt backends:", {k: (bool(v), getattr(v, "reason", "")) for k, v in evt_core.backends().items()})
EOF
} > "$OUTDIR/env.txt" 2>&1 || { stage "environment probe failed (see env.txt)"; status=1; }
cat "$OUTDIR/env.txt" >&2

test_paths=""
# the conformance property runs at scale in its own stage (run_differential) unless turned off
for p in tests/gpu; do [ -e "$p" ] && test_paths="$test_paths $p"; done
[ "${EVT_DIFFERENTIAL:-1}" = "0" ] && [ -e properties ] && test_paths="$test_paths properties"
set -o pipefail

run_tests() {   # $1: where the pytest output goes besides the log ("tee" or "quiet")
  stage "GPU tests in${test_paths:- (none found)} (limit ${TEST_SECONDS} s)"
  if [ -z "$test_paths" ]; then
    echo "no tests/gpu or properties folder" > "$OUTDIR/gpu-tests.log"; return 5
  fi
  # -v: one line per test as it finishes, so a run cut at the limit still shows where it was
  # shellcheck disable=SC2086 # word splitting of the path list is intended
  EVT_POISON=1 HYPOTHESIS_PROFILE=gpu timeout -s INT -k 15 "$TEST_SECONDS" \
    python3 -m pytest -m gpu $XDIST $test_paths -v -rs --durations=15 --hypothesis-show-statistics \
    -p no:cacheprovider > "$OUTDIR/gpu-tests.log" 2>&1
  local rc=$?
  [ "$1" = tee ] && tail -n 60 "$OUTDIR/gpu-tests.log"
  return $rc
}

run_differential() {   # >= 10,000 checked examples per GPU backend -> differential.txt
  local secs="${EVT_DIFF_SECONDS:-240}" counts="$OUTDIR/.counts"
  rm -rf "$counts"; mkdir -p "$counts"
  stage "differential: ${EVT_DIFF_SHARDS:-8} shards x ${EVT_DIFF_TREES:-10} trees x (1 + ${EVT_DIFF_SIZES:-130}) problems per backend (limit ${secs} s)"
  # shellcheck disable=SC2086
  EVT_POISON=1 HYPOTHESIS_PROFILE=gpu EVT_COUNT_DIR="$counts" EVT_GPU_SHARDS="${EVT_DIFF_SHARDS:-8}" \
    EVT_GPU_TREES="${EVT_DIFF_TREES:-10}" EVT_SIZES_PER_TREE="${EVT_DIFF_SIZES:-130}" \
    timeout -s INT -k 15 "$secs" python3 -m pytest -m gpu $XDIST properties/test_backend_conformance.py -q -rs \
    --hypothesis-show-statistics -p no:cacheprovider > "$OUTDIR/differential.log" 2>&1
  local rc=$?
  { echo "differential run $(date -u +%Y-%m-%dT%H:%MZ), pytest exit $rc"; tail -n 3 "$OUTDIR/differential.log";
    cat "$counts"/*.txt 2>/dev/null | awk '{n[$1] += $2} END {for (b in n) print "checked examples", b, n[b]}'; } \
    > "$OUTDIR/differential.txt"
  # the per-worker count files are summed above: left in $OUTDIR, their number crowded other
  # results out of what a remote run brings back
  rm -rf "$counts"
  cat "$OUTDIR/differential.txt" >&2
  [ $rc -eq 0 ] || { stage "differential FAILED or stopped (exit $rc)"; status=1; }
}

run_sanitizer() {   # compute-sanitizer memcheck + racecheck over representative kernels -> sanitizer.txt
  local out="$OUTDIR/sanitizer.txt"
  if ! command -v compute-sanitizer >/dev/null; then echo "compute-sanitizer: not installed" > "$out"; return; fi
  : > "$out"
  for tool in memcheck racecheck; do
    stage "compute-sanitizer --tool $tool (limit ${EVT_SANITIZE_SECONDS:-120} s)"
    { echo "== $tool $(date -u +%Y-%m-%dT%H:%MZ)"
      timeout -k 5 "${EVT_SANITIZE_SECONDS:-120}" compute-sanitizer --tool "$tool" --error-exitcode 3 \
        python3 scripts/sanitize_kernels.py 2>&1 | grep -v "^\[evt" | tail -n 25
      echo "exit ${PIPESTATUS[0]}"; } >> "$out" 2>&1
  done
  cat "$out" >&2
}

report_tests() {
  case $1 in
    0) stage "GPU tests passed" ;;
    skipped) stage "GPU tests skipped (EVT_TESTS=0)" ;;
    5) stage "GPU tests: none collected (exit 5)" ;;
    2|124|130|137) stage "GPU tests stopped: ${TEST_SECONDS} s limit reached or interrupted (exit $1)"; status=1 ;;
    *) stage "GPU tests FAILED (exit $1)"; status=1 ;;
  esac
}

run_bench() {
  stage "benchmark (budget ${BENCH_SECONDS} s)"
  timeout -k 10 "$((BENCH_SECONDS + 45))" \
    python3 -m bench.run --out "$OUTDIR" --budget "$BENCH_SECONDS" "$@" 2>&1 | tee "$OUTDIR/bench.log"
  local rc=$?
  if [ $rc -ne 0 ]; then stage "benchmark FAILED or stopped (exit $rc); partial results are kept"; status=1; fi
}

run_launch_probe() {   # host cost per call of tiny problems -> launch.txt
  timeout -k 5 60 python3 -m bench.launch_overhead > "$OUTDIR/launch.txt" 2>&1 || echo "launch probe failed" >> "$OUTDIR/launch.txt"
}

# With two or more GPUs (and EVT_SPLIT_GPUS not 0) the tests run on GPU 1 while the benchmark
# has GPU 0 to itself; otherwise one after the other.
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c "^GPU" || true)
if [ "${EVT_SPLIT_GPUS:-1}" != "0" ] && [ "${ngpu:-0}" -ge 2 ]; then
  stage "split mode: tests on GPU 1, benchmark on GPU 0"
  (export CUDA_VISIBLE_DEVICES=1; rc=skipped; [ "${EVT_TESTS:-1}" = "0" ] || { run_tests quiet; rc=$?; }
   echo $rc > "$OUTDIR/.tests_rc"
   [ "${EVT_DIFFERENTIAL:-1}" = "0" ] || run_differential; run_launch_probe) &
  tests_pid=$!
  CUDA_VISIBLE_DEVICES=0 run_bench "$@"
  wait "$tests_pid"
  tail -n 60 "$OUTDIR/gpu-tests.log" 2>/dev/null
  report_tests "$(cat "$OUTDIR/.tests_rc")"
  rm -f "$OUTDIR/.tests_rc"
else
  if [ "${EVT_TESTS:-1}" != "0" ]; then
    run_tests tee
    report_tests $?
  else
    report_tests skipped
  fi
  [ "${EVT_DIFFERENTIAL:-1}" = "0" ] || run_differential
  [ "${EVT_SANITIZE:-1}" = "0" ] || run_sanitizer
  [ "${EVT_BENCH:-1}" = "0" ] || run_bench "$@"
  run_launch_probe
fi
cat "$OUTDIR/launch.txt" >&2

if [ -z "${OUT:-}" ]; then
  for f in RESULTS.md results.json plot.png; do
    [ -f "$OUTDIR/$f" ] && cp "$OUTDIR/$f" bench/
  done
fi
stage "done (exit $status); files in $OUTDIR: $(ls "$OUTDIR" | tr '\n' ' ')"
exit $status
