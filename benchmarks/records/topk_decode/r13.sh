#!/usr/bin/env bash
# H200, issue 33: 000a273 (the cluster's count-only path) against b0df8ff on clean rows, the two
# wheels in alternation (r12 ran each once, new first: 31.3 / 30.1 and 94.0 / 90.8 us); then the
# top-k GPU tests without "cluster" in their name (the split and one-block paths: b0df8ff's
# restore of their spill store had not run on a GPU). Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
echo "old revision $(cat .whl/old/REVISION)"
timeout 60 python3 benchmarks/topk/prebuild.py 49152:1024:12:cluster2 2>&1 | tail -1
PYTHONPATH=/tmp/site_old timeout 60 python3 benchmarks/topk/prebuild.py 49152:1024:12:cluster2 2>&1 | tail -1; el
bench() {   # $1 = tag
  timeout 60 python3 benchmarks/topk/bench_topk.py --shapes 64x131072,64x1048576 --budgets 48K --bits 12 \
    --threads 1024 --reps 10 --no-split-compare --dist random_normal --serve-calls 5 --out "$OUT/ab.csv" > "$OUT/$1.log" 2>&1
  echo "== $1 rc=$? $(grep -E '^B=' "$OUT/$1.log" | awk '{print $4, $11}' | tr '\n' ' ')"
}
for i in 1 2 3; do bench new_$i; PYTHONPATH=/tmp/site_old bench old_$i; done; el
stage not_cluster 330 tests/topk/test_topk_gpu.py -k "not cluster"
