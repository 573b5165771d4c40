#!/usr/bin/env bash
# H200: A/B of the two-level cluster threshold search gated to S >= 4, old = main before it
# (.whl/old -> /tmp/site_old), new (.whl -> /tmp/site), at shapes whose plan takes S = 4..8,
# then the top-k GPU suite on the new one. Output under $OUT: ab_<label>.log/.csv, topk_tests.log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
export PYTHONUNBUFFERED=1
B="benchmarks/bench_topk.py --shapes 8x131072,16x131072,32x131072,16x1048576,32x1048576 --budgets 32K --bits 12 --threads 512 --no-split-compare --reps 15 --serve-calls 20"
for label in old new; do
  site=/tmp/site; [ $label = old ] && site=/tmp/site_old
  PYTHONPATH=$site timeout 70 python3 $B --out "$OUT/ab_$label.csv" > "$OUT/ab_$label.log" 2>&1
  echo "$label rc=$?"; grep '^B=' "$OUT/ab_$label.log" | cut -c1-100
done
PYTHONPATH=/tmp/site timeout 360 python3 -m pytest -v -x tests/gpu/test_topk_gpu.py > "$OUT/topk_tests.log" 2>&1
echo "tests rc=$?"; grep -c PASSED "$OUT/topk_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/topk_tests.log" | tail -5
