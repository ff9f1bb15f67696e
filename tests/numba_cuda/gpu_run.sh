#!/bin/bash
# One device call: GPU tests in 5 parallel shards (compiles are CPU-bound and single-threaded),
# then the timing/launch/SASS report. Logs go to $OUT.
export PYTHONPATH=$PWD:/tmp/p; mkdir -p /tmp/p && ln -sfn $PWD/backends /tmp/p/evt_backends
export PYTHONUNBUFFERED=1 EVT_CACHE_DIR=/tmp/evtc
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $OUT/gpu.txt 2>&1
T=test_numba_cuda.py
shards=("bias_relu_stats and float16 and not bfloat16" "bias_relu_stats and (bfloat16 or float32)"
        "test_trees and True" "test_trees and False"
        "layouts or random or deterministic or second or cupy or torch")
i=0
for k in "${shards[@]}"; do
  timeout ${SHARD_S:-200} python3 -m pytest -q -m gpu -p no:cacheprovider tests/gpu/$T -k "$k" -x --tb=short \
     > $OUT/shard$i.log 2>&1 &
  i=$((i+1))
done
wait
tail -n 3 $OUT/shard*.log
timeout ${REPORT_S:-80} python3 -m bench.numba_gpu_report 2>&1 | tee $OUT/report.txt
grep -h -E "FAILED|Error" $OUT/shard*.log | head -20
