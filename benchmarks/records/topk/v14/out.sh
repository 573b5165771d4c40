#!/usr/bin/env bash
# H200: the serving suite (with the out= test), then three rounds of the host probe (ours, ours
# into its own buffer, torch.topk, ...).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 200 python3 -m pytest -q tests/gpu/test_topk_serving_gpu.py > "$OUT/serving_tests.log" 2>&1
echo "serving suite rc=$?"; grep -E "FAILED|passed|failed" "$OUT/serving_tests.log" | tail -4; el
for r in 1 2 3; do python3 benchmarks/host_probe.py > "$OUT/host_probe_$r.log" 2>&1; echo "round $r rc=$?"
  grep -E "^B=|ours|torch.topk|one " "$OUT/host_probe_$r.log"; done; el
