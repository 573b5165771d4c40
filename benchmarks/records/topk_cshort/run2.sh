#!/usr/bin/env bash
# H200, issue 33: exp2 (where the cluster kernel's register path beats the default on rows that are
# not long; what the L2 flush costs each kernel at (1, 8K)) and the read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
export OCCTUNE_RESULTS=$PWD/results
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
cd benchmarks && timeout 300 python3 records/topk_cshort/exp2.py > $OUT/exp2.csv 2> $OUT/exp2.err; echo "== exp2 rc=$?"
cat $OUT/exp2.csv; tail -3 $OUT/exp2.err; el
timeout 60 python3 read_probe.py --shapes 1x4096,2x8192,4x8192,8x8192,16x8192,4x16384,16x16384,1x32768,4x32768,1x65536,2x65536 2>&1 | tail -12 | tee $OUT/read_probe.log; el
