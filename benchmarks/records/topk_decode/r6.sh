#!/usr/bin/env bash
# H200, issue 33: the radix refine's one-key collapse (the first digit pass finds bin t's key span;
# one key resolves every digit: topk_refine_emit, and the spread resident rows' refine with the span
# merged in the workspace). The top-k GPU suite and the resident tests, then the decode table with
# clean and all-equal rows (issue 17's overflow rule, within 2x of the clean run) and the all-equal
# phase profile of the two resident paths. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 60 python3 benchmarks/topk/prebuild.py 40960:512:8:resident,split,cluster2,cluster3,cluster4,cluster8,cluster16 \
  40960:512:12:resident,split,cluster2,cluster5 40960:256:12:cluster2 4096:512:8:resident 32768:512:8:resident,split,cluster2,cluster4,cluster8 \
  32768:512:12:resident,split,cluster2,cluster4,cluster8,cluster8r 32768:256:12:cluster8 32768:1024:12:resident,cluster8 \
  49152:512:8:resident,split,cluster2,cluster4,cluster8 49152:512:12:resident,split,cluster2,cluster4,cluster8 \
  49152:1024:12:resident,split,cluster2,cluster8r 98304:512:8:resident 98304:1024:12:resident 38912:512:8:resident 38912:1024:12:resident \
  8192:512:12:resident 16384:512:12:resident 40960:1024:12:resident 2>&1 | tail -2; el
stage topk_gpu 230 tests/topk/test_topk_gpu.py
stage resident 60 tests/topk/test_topk_resident_gpu.py
timeout 110 python3 benchmarks/topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 --budgets 48K \
  --bits 12 --threads 1024,512 --reps 10 --default --no-split-compare --dist random_normal,all_equal --serve-calls 50 \
  --out "$OUT/bench.csv" > "$OUT/bench.log" 2>&1; echo "== bench rc=$?"; el; sed -n '/^overflow check/,$p' "$OUT/bench.log"
timeout 45 python3 benchmarks/topk/profile_topk.py --shapes 64x8192,1x1048576 --dist all_equal --budget 48K --bits 12 \
  --threads 1024 --split auto --cluster auto --resident auto --reps 5 > "$OUT/profile_all_equal.log" 2>&1
echo "== profile rc=$?"; grep -v "^#" "$OUT/profile_all_equal.log"; el
