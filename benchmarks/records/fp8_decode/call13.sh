#!/usr/bin/env bash
# Device call 13 (H200): issue 32's weight-layout question at M = 1 (explore_layout.py), then issue
# 33's long decode shapes at 512 and 1024 threads (topk_decode/r4.sh). Logs under $OUT.
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 170 python3 benchmarks/records/fp8_decode/explore_layout.py --out "$OUT/layout.json" > "$OUT/layout.log" 2>&1
echo "layout rc=$?"; el; grep -v Warn "$OUT/layout.log" | cut -c1-150
OUT=$OUT bash benchmarks/records/topk_decode/r4.sh
