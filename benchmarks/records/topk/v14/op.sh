#!/usr/bin/env bash
# H200: the serving suite (the op under torch.compile and in a captured graph) and two rounds of
# the host probe, after the op moved from torch.library.custom_op to Library.define/impl.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 150 python3 -m pytest -q tests/gpu/test_topk_serving_gpu.py > "$OUT/serving_tests.log" 2>&1
echo "serving suite rc=$?"; grep -E "FAILED|passed|failed" "$OUT/serving_tests.log" | tail -4; el
for r in 1 2; do python3 benchmarks/host_probe.py > "$OUT/host_probe_$r.log" 2>&1; echo "round $r rc=$?"
  grep -E "^B=|  ours  |own buffer|occtune.topk|torch.topk" "$OUT/host_probe_$r.log"; done; el
