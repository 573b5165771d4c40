#!/usr/bin/env bash
# H200, issue 33: the 8-bit coarse key against the 12-bit one on the short and medium decode shapes
# (bench_topk.py, every config verified first; 512 and 1024 threads), then the 8-bit phase profile
# of the 8K shapes. Logs under $OUT. (Run as one command on the loan of run 6.)
set -u
cd "$(dirname "$0")/../../.."
source benchmarks/records/device_env.sh
cd benchmarks && timeout 200 python3 topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x16384,1x65536 \
  --budgets 48K --bits 8,12 --threads 512,1024 --reps 10 --no-split-compare --out $OUT/bench_bits.csv \
  > $OUT/bench_bits.log 2>&1; echo "== bench rc=$?"; grep -v "^#" $OUT/bench_bits.log | tail -40; el
cd .. && timeout 120 python3 benchmarks/topk/profile_topk.py --shapes 1x8192,64x8192 --budget 48K --bits 8 \
  --threads 1024 --reps 10 > $OUT/profile8.log 2>&1; cat $OUT/profile8.log; el
