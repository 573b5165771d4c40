#!/usr/bin/env bash
# H200, one call: the cluster threshold search done by every warp (one block barrier instead of
# seven) against the previous kernel (.whl/old -> /tmp/site_old; .whl -> /tmp/site). First the
# new kernel's cluster GPU tests, then two rounds of bench_topk (cluster shapes, S >= 4: the ones
# the change reaches) and of the phase profile at (8,128K), old and new alternating.
# Output under $OUT: cluster_tests.log, bench_<label>_<round>.{log,csv}, prof_<label>_<round>.log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
export PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "new $(cat .whl/REVISION) old $(cat .whl/old/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q tests/gpu/test_topk_gpu.py -k "cluster" > "$OUT/cluster_tests.log" 2>&1
echo "cluster tests rc=$?"; tail -2 "$OUT/cluster_tests.log"; el
for round in 1 2; do
  for label in old new; do
    site=/tmp/site; [ $label = old ] && site=/tmp/site_old
    PYTHONPATH=$site timeout 120 python3 benchmarks/bench_topk.py --shapes 8x131072,4x131072,16x131072,32x131072,32x1048576 \
      --budgets 32K --bits 12 --threads 512,1024 --reps 15 --serve-calls 50 --no-split-compare \
      --out "$OUT/bench_${label}_$round.csv" > "$OUT/bench_${label}_$round.log" 2>&1
    echo "bench $label $round rc=$?"; grep '^B=' "$OUT/bench_${label}_$round.log" | cut -c1-100; el
    PYTHONPATH=$site timeout 60 python3 benchmarks/profile_topk.py --shapes 8x131072 --split auto --cluster auto \
      --threads 512,1024 > "$OUT/prof_${label}_$round.log" 2>&1
    echo "prof $label $round rc=$?"; grep -E "^ +8 +131072" "$OUT/prof_${label}_$round.log" | cut -c1-150; el
  done
done
