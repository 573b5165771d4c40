#!/usr/bin/env bash
# Device call 9 of issue 32 (H200): the ops' C++ kernels with host TMA descriptors (PIPE 4-7, 10),
# the family's GPU tests, the host probe, and PIPE 10's last program adding its own partial from
# registers (explore_own.py). Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call9.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
stage gpu_tests 240 -rs tests/fp8_gemm/test_fp8_gemm_gpu.py
timeout 90 python3 benchmarks/fp8_gemm/fp8_host_probe.py > "$OUT/host.log" 2>&1; echo "host rc=$?"; el
cat "$OUT/host.log"
timeout 200 python3 benchmarks/records/fp8_decode/explore_own.py --out "$OUT/own.json" > "$OUT/own.log" 2>&1
echo "own rc=$?"; el; tail -60 "$OUT/own.log"
