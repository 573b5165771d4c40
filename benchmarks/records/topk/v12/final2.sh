#!/usr/bin/env bash
# H200, one call on the final kernel: the GPU tests whose plans take the register path (its own
# families, the cluster families with S=16, the automatic split plans), then issue 17's table,
# host probe, serving tests and plan check (tools/gpu_run.sh's topk_serve stage).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 200 python3 -m pytest -v tests/gpu/test_topk_gpu.py -k "register_path or cluster_kernel_families or split_path_auto or plan_takes" > "$OUT/regs_tests.log" 2>&1
echo "register-path tests rc=$?"; grep -c PASSED "$OUT/regs_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/regs_tests.log" | tail -4; el
STAGE_TIMEOUT=200 bash tools/gpu_run.sh install topk_serve; el
