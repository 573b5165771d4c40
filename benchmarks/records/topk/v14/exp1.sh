#!/usr/bin/env bash
# H200: the existing split and cluster paths forced at B = 256 (the plan takes one block per
# row there), 256 and 512 threads, against the plan; issue 17 item 6's B = 256 shapes.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 400 python3 benchmarks/bench_topk.py --shapes 256x131072,256x1048576 --budgets 32K --bits 12 \
  --threads 256,512 --compare-all --splits 2,3,4 --clusters 2,3 --reps 15 --serve-calls 20 \
  --out "$OUT/exp1.csv" > "$OUT/exp1.log" 2>&1; echo "rc=$?"
grep -E "^B=" "$OUT/exp1.log" | cut -c1-120; el
