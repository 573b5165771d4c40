#!/usr/bin/env bash
# H200, issue 33: the short-row cluster path as the automatic plan (policy.short_cluster): the
# cluster, short-row and plan GPU tests, the serving tests, then the decode benchmark with the
# default (random rows and all-equal rows: the overflow check) and the read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
source benchmarks/records/device_env.sh
stage topk_cluster 200 tests/topk/test_topk_gpu.py -k "short_rows or cluster or split_path_auto"
stage resident 60 tests/topk/test_topk_resident_gpu.py -k "plan_keeps"
stage serving 90 tests/topk/test_topk_serving_gpu.py
cd benchmarks && timeout 150 python3 topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072,1x16384,16x16384,1x65536 \
  --budgets 48K --bits 12 --threads 1024 --reps 10 --default --no-split-compare --dist random_normal,all_equal \
  --serve-calls 50 --out $OUT/bench.csv > $OUT/bench.log 2>&1; echo "== bench rc=$?"; grep -v "^#" $OUT/bench.log | tail -32; el
timeout 40 python3 read_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072,1x16384,16x16384,1x65536 2>&1 | tail -9 | tee $OUT/read_probe.log; el
