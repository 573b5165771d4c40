#!/usr/bin/env bash
# Device call 7 of issue 32 (H200): PIPE 10's scales one step ahead against two (explore_ahead.py).
#   (in a copy of the checkout with the wheel in .whl/)  bash benchmarks/records/fp8_decode/call7.sh
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 400 python3 benchmarks/records/fp8_decode/explore_ahead.py --out "$OUT/ahead.json" > "$OUT/ahead.log" 2>&1
echo "ahead rc=$?"; el; tail -60 "$OUT/ahead.log"
