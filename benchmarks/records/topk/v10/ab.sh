#!/usr/bin/env bash
# H200: the phase profile of the main shapes with the previous kernel (wheel in .whl/old,
# installed to /tmp/site_old) and the new one (.whl, /tmp/site), one after the other, then the new one's
# GPU tests. Output under $OUT: prof_<label>_<round>.log, topk_tests.log, serving_tests.log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_old .whl/old/occtune-*.whl
SH="1x1048576,8x1048576,8x131072,64x131072,256x131072,256x1048576"
for round in 1; do
  for label in old new; do
    site=/tmp/site; [ $label = old ] && site=/tmp/site_old
    (cd benchmarks && PYTHONPATH=$site timeout 150 python3 profile_topk.py --shapes $SH --bits 12 \
        --threads 512,1024 --budget 32K --split auto --cluster auto --reps 15 > "$OUT/prof_${label}_$round.log" 2>&1)
    echo "$label round $round rc=$?"
    [ $round = 2 ] && continue
    (cd benchmarks && PYTHONPATH=$site timeout 60 python3 profile_topk.py --shapes 1x1048576 --bits 8 \
        --threads 512,1024 --budget 32K --split auto --cluster auto --reps 15 > "$OUT/prof8_${label}.log" 2>&1)
  done
done
PYTHONPATH=/tmp/site timeout 240 python3 -m pytest -q -x tests/gpu/test_topk_gpu.py > "$OUT/topk_tests.log" 2>&1; echo "topk tests rc=$?"
PYTHONPATH=/tmp/site timeout 90 python3 -m pytest -q -x tests/gpu/test_topk_serving_gpu.py > "$OUT/serving_tests.log" 2>&1; echo "serving tests rc=$?"
