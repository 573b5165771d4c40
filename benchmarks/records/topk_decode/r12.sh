#!/usr/bin/env bash
# H200, issue 33: the cluster's sampled path counts only where its sample says the lists would
# overflow (topk_count_pass), and a row whose counted values are one key is finished by each
# block taking its share (topk_cluster_one_key). One loan: clean and all-equal rows on the working
# tree's wheel (.whl/) and on b0df8ff's (.whl/old/); the all-equal phase profile; the GPU tests of
# the changed paths and of b0df8ff's changes not yet run on a GPU. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
echo "old revision $(cat .whl/old/REVISION)"
S=8x131072,64x131072,64x1048576
PB="49152:1024:12:cluster2,cluster8r 49152:512:12:cluster3,cluster4 40960:512:8:cluster2,cluster3,cluster4,cluster5,cluster8"
timeout 90 python3 benchmarks/topk/prebuild.py $PB 2>&1 | tail -1; el
PYTHONPATH=/tmp/site_old timeout 60 python3 benchmarks/topk/prebuild.py 49152:1024:12:cluster2,cluster8r 2>&1 | tail -1; el
bench() {   # $1 = tag
  timeout 100 python3 benchmarks/topk/bench_topk.py --shapes $S --budgets 48K --bits 12 --threads 1024 \
    --reps 10 --no-split-compare --dist random_normal,all_equal --serve-calls 5 --out "$OUT/$1.csv" > "$OUT/$1.log" 2>&1
  echo "== $1 rc=$?"; sed -n '/^overflow check/,$p' "$OUT/$1.log"; el
}
bench new
PYTHONPATH=/tmp/site_old bench old
timeout 60 python3 benchmarks/topk/profile_topk.py --shapes 64x131072 --dist all_equal --budget 48K \
  --bits 12 --threads 1024 --split auto --cluster auto --resident auto --reps 5 > "$OUT/profile_all_equal.log" 2>&1
echo "== profile rc=$?"; grep -v "^#" "$OUT/profile_all_equal.log"; el
stage changed 200 tests/topk/test_topk_gpu.py -k "overflowed_lists or split_list_overflow or cluster_bin_overflow or cluster_stage_spills or cluster_64x1m"
stage regs 150 tests/topk/test_topk_gpu.py -k "register_path or short_rows"
