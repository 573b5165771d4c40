#!/usr/bin/env bash
# H200, issue 33: the committed one-key collapse (d9d9e7e: r6 ran it without the barrier after the
# span's read). The decode table with clean and all-equal rows, then the top-k GPU suite's first
# 141 tests (r8_tests.txt: r7 ran the other 39 on this code) and the resident tests. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 60 python3 benchmarks/topk/prebuild.py 32768:512:8:resident,split,cluster2,cluster4,cluster8 \
  32768:512:12:resident,split,cluster2,cluster4,cluster8,cluster8r 40960:512:8:resident,split,cluster2,cluster3,cluster4,cluster8,cluster16 \
  40960:512:12:resident,split,cluster2,cluster5 49152:512:12:resident,split,cluster2,cluster4,cluster8 \
  49152:1024:12:resident,split,cluster2,cluster8r 131072:1024:12:resident,cluster2,cluster8r 131072:512:12:resident 2>&1 | tail -1; el
timeout 110 python3 benchmarks/topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 --budgets 48K \
  --bits 12 --threads 1024,512 --reps 10 --default --no-split-compare --dist random_normal,all_equal --serve-calls 50 \
  --out "$OUT/bench.csv" > "$OUT/bench.log" 2>&1; echo "== bench rc=$?"; el; sed -n '/^overflow check/,$p' "$OUT/bench.log"
stage topk_gpu_1_141 300 -rf $(cat benchmarks/records/topk_decode/r8_tests.txt)
stage resident 60 tests/topk/test_topk_resident_gpu.py
