#!/usr/bin/env bash
# H200, one call on the final head: the read-once probe (its kernel now masks to its own chunk),
# then the serving suite (out=).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
python3 -c "import triton, torch; print('triton', triton.__version__, 'torch', torch.__version__)"
python3 benchmarks/read_probe.py --shapes 1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576 \
  2>&1 | tee "$OUT/read_probe.log"; el
timeout 200 python3 -m pytest -q tests/gpu/test_topk_serving_gpu.py > "$OUT/serving_tests.log" 2>&1
echo "serving suite rc=$?"; grep -E "FAILED|passed|failed" "$OUT/serving_tests.log" | tail -4; el
