#!/usr/bin/env bash
# Device call 2 of issue 32 (H200, one call): the decode benchmark (the committed table, allow-list
# and exports), the GPU tests, a large-M subset, the host probe. Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/final_call.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/occtune-*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 OCCTUNE_GIT_REVISION=$(cat .whl/REVISION)
OUT=${OUT:-out}; mkdir -p "$OUT/decode"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
echo "revision $OCCTUNE_GIT_REVISION"
timeout 160 python3 benchmarks/bench_fp8_gemm.py --m 1,8,32,64 --rep-ms 5 --warmup-ms 1 --smoke-s 90 \
  --out-dir "$OUT/decode" > "$OUT/decode.log" 2>&1; echo "decode rc=$?"; tail -14 "$OUT/decode.log"
timeout 95 python3 -m pytest -q -rs -rx -p no:cacheprovider tests/gpu/test_fp8_gemm_gpu.py > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$?"; tail -12 "$OUT/gpu_tests.log"
timeout 25 python3 benchmarks/bench_fp8_gemm.py --shapes "7168,2048;512,7168;4096,7168" --m 1024,4096 \
  --backends triton,torch_scaled_mm --triton "128,128,128,8,8,6,7;128,128,128,8,8,4,6" --rep-ms 5 --warmup-ms 1 \
  --out-dir /tmp/large > "$OUT/large.log" 2>&1; echo "large rc=$?"; cat /tmp/large/fp8_gemm_bench.md >> "$OUT/large.log"
tail -8 "$OUT/large.log"
timeout 30 python3 benchmarks/fp8_host_probe.py > "$OUT/host.log" 2>&1; echo "host rc=$?"; cat "$OUT/host.log"
