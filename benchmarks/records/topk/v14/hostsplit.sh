#!/usr/bin/env bash
# H200: host time per call on the split and cluster paths ((1,1M), (8,128K), (64,128K)), with a
# cProfile of 200 calls each: where the serving loop's host time goes beyond the launch.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
python3 benchmarks/host_probe.py --shapes 1x1048576,8x131072,64x131072,1x8192 --profile > "$OUT/host_split.log" 2>&1
echo "rc=$?"; grep -E "^B=|  ours|torch.topk|one |tottime|topk|empty|zeros|launch" "$OUT/host_split.log" | head -120; el
