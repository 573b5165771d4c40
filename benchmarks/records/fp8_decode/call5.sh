#!/usr/bin/env bash
# Device call 5 of issue 32 (H200, one call): with PIPE 10 (splitk_wgmma.py) in the decode buckets,
# the decode benchmark (the committed table, allow-list and exports), the family's GPU tests and the
# host probe. Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call5.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT/decode"
source benchmarks/records/device_env.sh
export OCCTUNE_GIT_REVISION=$(cat .whl/REVISION)
timeout 220 python3 benchmarks/fp8_gemm/bench_fp8_gemm.py --m 1,8,32,64 --rep-ms 5 --warmup-ms 1 --smoke-s 90 \
  --out-dir "$OUT/decode" > "$OUT/decode.log" 2>&1; echo "decode rc=$?"; el; tail -16 "$OUT/decode.log"
stage gpu_tests 240 -rs tests/fp8_gemm/test_fp8_gemm_gpu.py
timeout 60 python3 benchmarks/fp8_gemm/fp8_host_probe.py > "$OUT/host.log" 2>&1; echo "host rc=$?"; el
cat "$OUT/host.log"
