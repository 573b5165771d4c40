#!/usr/bin/env bash
# H200: the phase profile of the B = 256 shapes with every block's SM, start and end (where the
# end spread at (256,1M) comes from (27 us in v10's profile): for the planner's persistent-design
# question).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 300 python3 benchmarks/profile_topk.py --shapes 256x1048576,256x131072 --budget 32K --bits 12 \
  --threads 512 --split auto --blocks-csv "$OUT/blocks.csv" 2>&1 | tee "$OUT/profile.log"; el
