#!/usr/bin/env bash
# H200: launch_probe.py, then the phase profile of the cluster shapes with the previous kernel
# (.whl/old -> /tmp/site_old) and the new one (.whl -> /tmp/site), two rounds, then the new one's
# cluster GPU tests. Output under $OUT: launch_probe.log, prof_<label>_<round>.log, cluster_tests.log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site_old .whl/old/occtune-*.whl
PYTHONPATH=/tmp/site timeout 60 python3 benchmarks/records/topk/v10/launch_probe.py > "$OUT/launch_probe.log" 2>&1; echo "probe rc=$?"
for round in 1 2; do
  for label in old new; do
    site=/tmp/site; [ $label = old ] && site=/tmp/site_old
    (cd benchmarks && PYTHONPATH=$site timeout 100 python3 profile_topk.py --shapes 8x131072,64x131072 --bits 12 \
        --threads 512,1024 --budget 32K --split auto --cluster auto --reps 20 > "$OUT/prof_${label}_$round.log" 2>&1)
    echo "$label round $round rc=$?"
  done
done
PYTHONPATH=/tmp/site timeout 150 python3 -m pytest -q -x tests/gpu/test_topk_gpu.py -k "cluster" > "$OUT/cluster_tests.log" 2>&1; echo "cluster tests rc=$?"
