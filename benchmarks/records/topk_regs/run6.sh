#!/usr/bin/env bash
# H200, issue 33: exp7.py (the one-block LDS path with leaner histogram and collect, exact then
# timed) and Nsight Compute of the shipped and the leanest build at (1, 8K). e691bba + lean_patch.patch.
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
(cd benchmarks && timeout 300 python3 ../$R/exp7.py 2>&1 | tee $OUT/exp7.csv); el
for v in slice lean_both; do
  (cd benchmarks && timeout 100 ncu --target-processes all -k regex:topk_resident -s 3 -c 1 --section WarpStateStats \
    --section SchedulerStats --section InstructionStats --print-details all python3 ../$R/exp7.py ncu $v > $OUT/ncu_$v.txt 2>&1)
  echo "ncu $v rc=$?"; grep -E "Warp Cycles Per Issued|Stall No Instruction|Executed Instructions  |Elapsed Cycles  " $OUT/ncu_$v.txt
done; el
