#!/usr/bin/env bash
# H200, issue 33: Nsight Compute of the shipped two-pass kernel at (1, 8K) (main's tree, no patch),
# the same sections as run4.sh.
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
timeout 150 ncu --target-processes all -k regex:topk_transform -s 3 -c 1 --section LaunchStats \
  --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
  --section ComputeWorkloadAnalysis --print-details all python3 $R/exp6.py two-pass > $OUT/ncu_two_pass.txt 2>&1
echo "ncu rc=$?"
grep -E "Warp Cycles Per Issued|Stall No Instruction|Stall Wait|Executed Instructions  |Elapsed Cycles  " $OUT/ncu_two_pass.txt
