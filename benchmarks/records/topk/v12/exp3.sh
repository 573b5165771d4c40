#!/usr/bin/env bash
# H200, one call: the register path after its emission change (as exp2.sh, fewer shapes). Its GPU tests (and the cluster families,
# whose S=16 runs take it too), then bench_topk at small B on 128K rows (the plan, and the same
# cluster size without the register path: "sampled cluster"), then the phase profile of (8,128K).
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 260 python3 -m pytest -v -x tests/gpu/test_topk_gpu.py -k "register_path or cluster_kernel_families" > "$OUT/regs_tests.log" 2>&1
echo "register-path tests rc=$?"; grep -c PASSED "$OUT/regs_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/regs_tests.log" | tail -4; el
timeout 200 python3 benchmarks/bench_topk.py --shapes 8x131072,4x131072,1x131072,16x131072 --budgets 32K \
  --bits 12 --threads 512,1024 --reps 15 --serve-calls 100 --out "$OUT/regs_bench.csv" > "$OUT/regs_bench.log" 2>&1
echo "bench rc=$?"; grep '^B=' "$OUT/regs_bench.log" | cut -c1-118; el
timeout 90 python3 benchmarks/profile_topk.py --shapes 8x131072,1x131072 --split auto --cluster auto --threads 512,1024 \
  > "$OUT/regs_prof.log" 2>&1; echo "profile rc=$?"; cat "$OUT/regs_prof.log" | cut -c1-200; el
