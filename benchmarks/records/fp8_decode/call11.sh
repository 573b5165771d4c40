#!/usr/bin/env bash
# Device call 11 of issue 32 (H200): the family's GPU tests (PIPE 10 the default on sm_90), PIPE 10
# with two warp groups splitting the tokens (explore_split_tokens.py), and the host probe. Logs
# under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call11.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
stage gpu_tests 240 -rs tests/fp8_gemm/test_fp8_gemm_gpu.py
timeout 300 python3 benchmarks/records/fp8_decode/explore_split_tokens.py --out "$OUT/split_tokens.json" \
  > "$OUT/split_tokens.log" 2>&1; echo "split_tokens rc=$?"; el; tail -40 "$OUT/split_tokens.log"
timeout 90 python3 benchmarks/fp8_gemm/fp8_host_probe.py > "$OUT/host.log" 2>&1; echo "host rc=$?"; el
head -8 "$OUT/host.log"; grep -E "torch.ops|out=" "$OUT/host.log" | head -50
