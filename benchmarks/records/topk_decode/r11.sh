#!/usr/bin/env bash
# H200, issue 33: the cluster register path's overflow narrowed over its slices read again (out of
# line: no spills, 75 registers not 128 at 512 threads) against b0df8ff, where it was narrowed over
# the registers. `r11.sh bench`: clean and all-equal rows on both wheels (.whl/ the working tree,
# .whl/old/ b0df8ff), then the all-equal phase profile; `r11.sh tests`: the GPU tests of the
# changed paths and of b0df8ff's changes not yet run on a GPU. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
if [ "${1:-bench}" = bench ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
  echo "old revision $(cat .whl/old/REVISION)"
  S=1x8192,16x16384,8x131072,64x131072
  PB="49152:1024:12:cluster2,cluster8r 49152:512:12:cluster2,cluster3,cluster8r 49152:256:12:cluster8r"
  timeout 90 python3 benchmarks/topk/prebuild.py $PB 2>&1 | tail -1; el
  PYTHONPATH=/tmp/site_old timeout 90 python3 benchmarks/topk/prebuild.py $PB 2>&1 | tail -1; el
  bench() {   # $1 = tag
    timeout 120 python3 benchmarks/topk/bench_topk.py --shapes $S --budgets 48K --bits 12 --threads 1024,512 \
      --reps 10 --no-split-compare --dist random_normal,all_equal --serve-calls 5 --out "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
    echo "== $1 rc=$?"; sed -n '/^overflow check/,$p' "$OUT/$1.log"; el
  }
  bench new
  PYTHONPATH=/tmp/site_old bench old
  timeout 150 python3 benchmarks/topk/profile_topk.py --shapes 8x131072,64x131072 --dist all_equal --budget 48K \
    --bits 12 --threads 1024 --split auto --cluster auto --resident auto --reps 5 > "$OUT/profile_all_equal.log" 2>&1
  echo "== profile rc=$?"; grep -v "^#" "$OUT/profile_all_equal.log"; el
else
  stage changed 280 tests/topk/test_topk_gpu.py -k "register_path or short_rows or overflowed_lists or split_list_overflow"
  stage rest 280 tests/topk/test_topk_gpu.py -k "split_path or long_row_list_overflow or cluster_stage_spills or bin_overflow"
fi
