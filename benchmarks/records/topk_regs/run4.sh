#!/usr/bin/env bash
# H200, issue 33: where the one-block paths' cycles go: Nsight Compute (warp states, instruction
# mix, source counters) of the register and slice paths at (1, 8K), and the SASS of the builds.
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; which ncu cuobjdump
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
for v in regs slice; do
  timeout 150 ncu --target-processes all -k regex:topk_resident -s 3 -c 1 --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section InstructionStats --section SourceCounters \
    --section ComputeWorkloadAnalysis --print-details all \
    python3 $R/exp6.py $v > $OUT/ncu_$v.txt 2>&1; echo "ncu $v rc=$?"; el
done
for f in /tmp/occtune-cache/rtc/*.bin; do
  n=$(cuobjdump -sass "$f" 2>/dev/null | grep -c "^ \+/\*[0-9a-f]\+\*/")
  if cuobjdump -sass "$f" 2>/dev/null | grep -q "Function : topk_resident_kernel"; then
    cuobjdump -sass "$f" > $OUT/sass_resident_$n.txt; echo "$f resident $n instructions"; fi
done; el
grep -E "Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per|Stall|Executed Instructions  " $OUT/ncu_*.txt | head -60
