#!/usr/bin/env bash
# H200, issue 33: the narrowing's lo/hi kept in the first radix pass only (the other passes never
# read them). The short-row and register-path GPU tests, then all-equal and random rows on the
# paths that narrow (the overflow check of run 5). Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
source benchmarks/records/device_env.sh
stage regs_tests 200 tests/topk/test_topk_gpu.py -k "short_rows or register_path"
cd benchmarks && timeout 150 python3 topk/bench_topk.py --shapes 1x8192,1x16384,1x65536,8x131072,16x16384 \
  --budgets 48K --bits 12 --threads 1024 --reps 10 --default --no-split-compare --dist random_normal,all_equal \
  --out $OUT/bench.csv > $OUT/bench.log 2>&1; echo "== bench rc=$?"; grep -v "^#" $OUT/bench.log | tail -30; el
