#!/usr/bin/env bash
# Device call 6 of issue 32 (H200): Nsight Compute on PIPE 10 where issue 32's bound is missed
# (M = 64) against M = 1 and cuBLASLt: speed of light, memory, warp states, occupancy. ncu flushes
# the caches before each profiled kernel (its default --cache-control all). Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call6.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
NCU="ncu --profile-from-start off --clock-control none --nvtx --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats --section Occupancy --section LaunchStats --section SchedulerStats"
for mnk in "64 7168 2048" "1 7168 2048" "64 4608 7168" "1 4608 7168"; do
  set -- $mnk
  tag="m$1_n$2_k$3"
  timeout 150 $NCU python3 benchmarks/fp8_gemm/profile_fp8_gemm.py $1 $2 $3 p10_32x64s3=32,64,128,1,4,3,10 \
    p10_16x64s4=16,64,128,1,4,4,10 p10_64x64s4=64,64,128,1,4,4,10 > "$OUT/ncu_$tag.txt" 2>&1
  echo "== $tag rc=$?"; el
  grep -E "^  [a-z_0-9]+.*\(|Duration|Memory Throughput|DRAM Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per|Block Limit|No Eligible|Issued Warp|Warp Cycles Per Issued|L2 Hit Rate|Grid Size" "$OUT/ncu_$tag.txt" | head -80
done
