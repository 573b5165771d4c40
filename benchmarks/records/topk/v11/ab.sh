#!/usr/bin/env bash
# H200: A/B of the cluster kernel's threshold search, old = main before it (.whl/old ->
# /tmp/site_old), new = the two-level search (.whl -> /tmp/site), two rounds at the cluster
# shapes (S=2: (64,128K) 1024 thr; S=3: (64,128K) and (64,1M) 512 thr; S=8: (8,128K)), then
# issue 17's table on the new one. Output under $OUT: ab_<label>_<round>.log/.csv, serve.log/.csv.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
export PYTHONUNBUFFERED=1
B="benchmarks/bench_topk.py --shapes 8x131072,64x131072,64x1048576 --budgets 32K --bits 12 --threads 512,1024 --no-split-compare --reps 15 --serve-calls 20"
for round in 1 2; do
  for label in old new; do
    site=/tmp/site; [ $label = old ] && site=/tmp/site_old
    PYTHONPATH=$site timeout 80 python3 $B --out "$OUT/ab_${label}_$round.csv" > "$OUT/ab_${label}_$round.log" 2>&1
    echo "$label round $round rc=$?"; grep '^B=' "$OUT/ab_${label}_$round.log" | cut -c1-100
  done
done
PYTHONPATH=/tmp/site timeout 90 python3 benchmarks/bench_topk.py --shapes 1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576 \
  --budgets 32K,48K --bits 12 --threads 512,1024 --reps 15 --serve-calls 300 --out "$OUT/serve.csv" > "$OUT/serve.log" 2>&1
echo "serve rc=$?"; grep -A9 '^summary' "$OUT/serve.log"
