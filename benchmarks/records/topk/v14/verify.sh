#!/usr/bin/env bash
# H200, one call on main's head: the read-once probe at issue 17's shapes, then the whole top-k
# GPU suite (main's kernel differs from the GPU-tested fe4d6af by b1b9843's constant).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 benchmarks/read_probe.py --shapes 1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576 \
  2>&1 | tee "$OUT/read_probe.log"; el
timeout 470 python3 -m pytest -q tests/gpu/test_topk_gpu.py > "$OUT/topk_tests.log" 2>&1
echo "top-k GPU suite rc=$?"; grep -E "FAILED|passed|failed" "$OUT/topk_tests.log" | tail -4; el
