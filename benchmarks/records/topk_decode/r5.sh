#!/usr/bin/env bash
# H200, issue 33: (1) the timed sweep of the profile's whole space (budgets x threads 512 and 1024:
# results/sm_90/topk.yaml's per-workload defaults came from a 512-thread sweep plus hand-copied
# bench winners); (2) the decode table on all eight shapes with the new defaults (--default), clean
# and all-equal rows (issue 17's overflow rule); (3) the phase profile of all-equal rows, where the
# overflowed rows' time goes; (4) the read-once probe. Logs and the sweep's results under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
export OCCTUNE_GIT_REVISION=$(cat .whl/REVISION)
timeout 240 python3 -m occtune topk --target sm_90 --out "$OUT/r" --cache /tmp/topk-sweep-cache --fresh --all \
  > "$OUT/sweep.log" 2>&1; echo "== sweep rc=$?"; grep -v "^sweep topk: [0-9]*/" "$OUT/sweep.log" | tail -45; el
cp "$OUT/r/sm_90/topk.yaml" results/sm_90/topk.yaml   # the bench's --default below reads the new defaults
S=1x8192,64x8192,8x131072,1x1048576,64x131072
timeout 200 python3 benchmarks/topk/bench_topk.py --shapes $S --budgets 48K --bits 12 --threads 512,1024 --reps 10 \
  --default --no-split-compare --dist random_normal,all_equal --serve-calls 50 --out "$OUT/topk_short.csv" \
  > "$OUT/topk_short.log" 2>&1; echo "== topk_short rc=$?"; el; sed -n '/^summary/,$p' "$OUT/topk_short.log"
timeout 150 python3 benchmarks/topk/bench_topk.py --shapes 64x1048576,256x131072,256x1048576 --budgets 32K,48K \
  --bits 12 --threads 512,1024 --reps 8 --default --no-split-compare --serve-calls 10 --out "$OUT/topk_long.csv" \
  > "$OUT/topk_long.log" 2>&1; echo "== topk_long rc=$?"; el; sed -n '/^issue 33/,$p' "$OUT/topk_long.log"
timeout 150 python3 benchmarks/topk/profile_topk.py --shapes $S --dist all_equal --budget 48K --bits 12 \
  --threads 1024 --split auto --cluster auto --resident auto --reps 5 > "$OUT/profile_all_equal.log" 2>&1
echo "== profile rc=$?"; cat "$OUT/profile_all_equal.log"; el
cd benchmarks && timeout 40 python3 read_probe.py --shapes $S,64x1048576,256x131072,256x1048576 2>&1 | tail -9 \
  | tee "$OUT/read_probe.log"; el
