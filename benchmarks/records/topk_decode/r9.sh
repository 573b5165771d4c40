#!/usr/bin/env bash
# H200, issue 33: the cluster kernel's overflowed lists finished over the blocks' slices (each
# block reads its slice again; block 0 no longer redoes the row alone) and the warp-merged
# histogram adds of all-equal slices (register path, keep-pass spill store, sample). One loan,
# both revisions: the decode table with clean and all-equal rows on the working tree's wheel
# (.whl/), then the clean rows on the parent's wheel (.whl/old/) for an A/B of the clean path;
# the all-equal phase profile; the cluster tests. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
echo "old revision $(cat .whl/old/REVISION)"
S=1x8192,64x8192,8x131072,1x1048576,64x131072
PB="49152:1024:12:resident,split,cluster2,cluster8r 49152:512:12:resident,split,cluster2,cluster3,cluster4,cluster8 \
  131072:1024:12:resident,cluster2,cluster8r 131072:512:12:resident 131072:256:12:cluster8r 49152:256:12:cluster8r \
  49152:512:12:cluster8r 131072:1024:12:split"
timeout 90 python3 benchmarks/topk/prebuild.py $PB 2>&1 | tail -1; el
PYTHONPATH=/tmp/site_old timeout 90 python3 benchmarks/topk/prebuild.py $PB 2>&1 | tail -1; el
bench() {   # $1 = tag, $2 = dists, then env
  timeout 120 python3 benchmarks/topk/bench_topk.py --shapes $S --budgets 48K --bits 12 --threads 1024,512 --reps 10 \
    --default --no-split-compare --dist "$2" --serve-calls 20 --out "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
  echo "== $1 rc=$?"; el
}
bench new random_normal,all_equal
sed -n '/^overflow check/,$p' "$OUT/new.log"
PYTHONPATH=/tmp/site_old bench old random_normal
sed -n '/^issue 33/,$p' "$OUT/old.log"
timeout 45 python3 benchmarks/topk/profile_topk.py --shapes 8x131072,64x131072 --dist all_equal --budget 48K --bits 12 \
  --threads 1024 --split auto --cluster auto --resident auto --reps 5 > "$OUT/profile_all_equal.log" 2>&1
echo "== profile rc=$?"; grep -v "^#" "$OUT/profile_all_equal.log"; el
stage cluster_tests 250 tests/topk/test_topk_gpu.py -k "cluster"
