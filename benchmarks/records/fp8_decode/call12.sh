#!/usr/bin/env bash
# Device call 12 of issue 32 (H200): the family's GPU tests (fp8_gemm() through the op's C++
# kernels), the host probe, and a GEMV-shaped kernel without split-K at M 1-8 (explore_gemv.py).
# Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call12.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
stage gpu_tests 200 -rs tests/fp8_gemm/test_fp8_gemm_gpu.py
timeout 90 python3 benchmarks/fp8_gemm/fp8_host_probe.py > "$OUT/host.log" 2>&1; echo "host rc=$?"; el
head -8 "$OUT/host.log"; grep -E "fp8_gemm|scaled_mm" "$OUT/host.log" | head -60
timeout 250 python3 benchmarks/records/fp8_decode/explore_gemv.py --out "$OUT/gemv.json" > "$OUT/gemv.log" 2>&1
echo "gemv rc=$?"; el; cat "$OUT/gemv.log" | grep -v Warn
