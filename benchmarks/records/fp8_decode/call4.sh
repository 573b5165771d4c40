#!/usr/bin/env bash
# Device call 4 of issue 32 (H200): explore the Gluon split-K decode kernel (PIPE 10 prototype)
# against PIPE 8/9's committed configs, cuBLASLt and the read-once probe. Logs under $OUT.
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call4.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 520 python3 benchmarks/records/fp8_decode/explore_wgmma.py --out "$OUT/explore.json" > "$OUT/explore.log" 2>&1
echo "explore rc=$?"; el; cat "$OUT/explore.log" | tail -70
