#!/usr/bin/env bash
# H200, issue 33: host time per call after ff98b71 (8K rows now on the resident kernel's one-block
# path), the r2 command of benchmarks/records/topk_decode. A wheel of 70481a1.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
cd benchmarks && timeout 150 python3 topk/host_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576 \
  --budget 49152 --threads 1024 --calls 300 2>&1 | tee $OUT/host_probe.log
