#!/usr/bin/env bash
# H200, one call on the final kernel: the whole top-k GPU suite, then issue 17's table, host
# probe, serving tests and plan check (tools/gpu_run.sh's topk_serve stage).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 330 python3 -m pytest -q tests/gpu/test_topk_gpu.py > "$OUT/topk_tests.log" 2>&1
echo "top-k GPU suite rc=$?"; grep -E "FAILED|passed|failed" "$OUT/topk_tests.log" | tail -4; el
STAGE_TIMEOUT=200 bash tools/gpu_run.sh install topk_serve; el
