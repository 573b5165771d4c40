#!/usr/bin/env bash
# H200, one call on main's head: the read-once probe, then issue 17's table, host probe, serving
# tests and plan check (tools/gpu_run.sh's topk_serve stage; the bench now has the read1 column).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
python3 benchmarks/read_probe.py --shapes 1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576 \
  2>&1 | tee "$OUT/read_probe.log"; el
STAGE_TIMEOUT=240 TAIL=40 bash tools/gpu_run.sh install topk_serve; el
