#!/usr/bin/env bash
# H200, one call, three kernels: a = cf860fb (the warp-wide cluster search), b = 84fe75c (+ the
# register path's one-compare skip below bin t), c = b + two blocks per SM for the register build
# at <= 512 threads. c's register-path and cluster GPU tests; bench_topk at small B on 128K rows,
# a/b/c alternating, two rounds; the phase profile of (8,128K) for b and c; then, on c, the
# two-level search from 2 blocks (TOPK_CLUSTER_TWO_LEVEL=2) against the default at S = 2, 3.
set -u
for v in a b c; do
  python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_$v .whl/$v/occtune-*.whl
done
export PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "a $(cat .whl/a/REVISION) b $(cat .whl/b/REVISION) c $(cat .whl/c/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
PYTHONPATH=/tmp/site_c timeout 170 python3 -m pytest -q tests/gpu/test_topk_gpu.py -k "register_path or cluster_kernel_families or plan_takes" > "$OUT/tests_c.log" 2>&1
echo "tests c rc=$?"; tail -2 "$OUT/tests_c.log"; el
for round in 1 2; do
  for v in a b c; do
    PYTHONPATH=/tmp/site_$v timeout 90 python3 benchmarks/bench_topk.py --shapes 8x131072,16x131072,4x131072 \
      --budgets 32K --bits 12 --threads 512,1024 --reps 15 --serve-calls 50 --no-split-compare \
      --out /tmp/bench_${v}_$round.csv > /tmp/bench_${v}_$round.log 2>&1
    echo "bench $v $round rc=$?"; grep '^B=' /tmp/bench_${v}_$round.log | cut -c1-100
  done
  el
done
for v in b c; do
  PYTHONPATH=/tmp/site_$v timeout 60 python3 benchmarks/profile_topk.py --shapes 8x131072,16x131072 --split auto \
    --cluster auto --threads 512,1024 > /tmp/prof_$v.log 2>&1
  echo "prof $v rc=$?"; grep -E "^ +(8|16) +131072" /tmp/prof_$v.log | cut -c1-150
done
el
for d in default two; do
  def=""; [ $d = two ] && def="--define TOPK_CLUSTER_TWO_LEVEL=2"
  PYTHONPATH=/tmp/site_c timeout 100 python3 benchmarks/profile_topk.py --shapes 64x131072,64x1048576 --bits 12 \
    --threads 512,1024 --budget 32K --split auto --cluster auto $def > /tmp/tl_$d.log 2>&1
  echo "two-level $d rc=$?"; grep -E "^ +64 +" /tmp/tl_$d.log | cut -c1-150
done
el
tar czf "$OUT/ab2_logs.tgz" -C /tmp $(cd /tmp && ls bench_*_*.log bench_*_*.csv prof_*.log tl_*.log)
