#!/usr/bin/env bash
# H200, issue 33: exp5.py (the register path's raw stamps, with the collect's inner stamps).
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
(cd benchmarks && timeout 200 python3 ../$R/exp5.py 2>&1 | tee $OUT/exp5.log)
