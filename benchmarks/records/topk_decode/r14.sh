#!/usr/bin/env bash
# H200, issue 33: the count-only path's clean-row cost. r13 measured 000a273 4-5% slower than
# b0df8ff on clean (64, 128K) and 3.5% on (64, 1M) (three alternations). Candidates, in
# alternation on one loan: .whl/ (the count-only flag in shared memory, read back after barrier
# (1)), .whl/b/ (the same with the count pass inlined), .whl/old/ (b0df8ff); then all-equal rows
# and the overflow tests on .whl/. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
for w in old b; do
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_$w .whl/$w/occtune-*.whl
  echo "$w revision $(cat .whl/$w/REVISION)"
done
for s in "" /tmp/site_b /tmp/site_old; do
  PYTHONPATH=${s:-/tmp/site} timeout 60 python3 benchmarks/topk/prebuild.py 49152:1024:12:cluster2 2>&1 | tail -1
done; el
bench() {   # $1 = tag, $2 = site, $3 = dists
  PYTHONPATH=$2 timeout 60 python3 benchmarks/topk/bench_topk.py --shapes 64x131072,64x1048576 --budgets 48K --bits 12 \
    --threads 1024 --reps 10 --no-split-compare --dist $3 --serve-calls 5 --out "$OUT/ab.csv" > "$OUT/$1.log" 2>&1
  echo "== $1 rc=$? $(grep -E '^B=' "$OUT/$1.log" | awk '{print $4, $11}' | tr '\n' ' ')"
}
for i in 1 2 3; do
  bench new_$i /tmp/site random_normal; bench b_$i /tmp/site_b random_normal; bench old_$i /tmp/site_old random_normal
done; el
bench new_all_equal /tmp/site random_normal,all_equal; sed -n '/^overflow check/,/^$/p' "$OUT/new_all_equal.log"; el
stage changed 200 tests/topk/test_topk_gpu.py -k "overflowed_lists or split_list_overflow or cluster_bin_overflow or cluster_stage_spills or cluster_64x1m"
