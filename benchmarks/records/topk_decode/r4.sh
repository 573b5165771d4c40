#!/usr/bin/env bash
# H200, issue 33: the three long decode shapes not re-measured since r3 (64 x 1M, 256 x 128K,
# 256 x 1M), at 512 and 1024 threads (r3 tried 512 only), 32K and 48K, beside the default and the
# read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 300 python3 benchmarks/topk/bench_topk.py --shapes 64x1048576,256x131072,256x1048576 --budgets 32K,48K \
  --bits 12 --threads 512,1024 --reps 8 --default --no-split-compare --serve-calls 10 --out "$OUT/topk_long.csv" \
  > "$OUT/topk_long.log" 2>&1; echo "== topk_long rc=$?"; el; tail -30 "$OUT/topk_long.log"
cd benchmarks && timeout 40 python3 read_probe.py --shapes 64x1048576,256x131072,256x1048576 2>&1 | tail -6 \
  | tee "$OUT/read_probe.log"; el
