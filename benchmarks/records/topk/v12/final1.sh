#!/usr/bin/env bash
# H200, one call: the register path with its warp-scan emission (A/B against the sampled path at
# the same cluster size, phase profile), then the whole top-k GPU suite.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 90 python3 benchmarks/bench_topk.py --shapes 8x131072,4x131072,1x131072 --budgets 32K --bits 12 \
  --threads 512,1024 --reps 15 --serve-calls 100 --out "$OUT/regs_bench.csv" > "$OUT/regs_bench.log" 2>&1
echo "bench rc=$?"; grep '^B=' "$OUT/regs_bench.log" | cut -c1-118; el
timeout 40 python3 benchmarks/profile_topk.py --shapes 8x131072 --split auto --cluster auto --threads 512,1024 \
  > "$OUT/regs_prof.log" 2>&1; echo "profile rc=$?"; cut -c1-200 "$OUT/regs_prof.log"; el
timeout 450 python3 -m pytest -v tests/gpu/test_topk_gpu.py > "$OUT/topk_tests.log" 2>&1
echo "top-k GPU suite rc=$?"; grep -c PASSED "$OUT/topk_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/topk_tests.log" | tail -5; el
