#!/usr/bin/env bash
# H200, issue 33: the phase profile (benchmarks/topk/profile_topk.py: the call's time, then per
# phase from a TOPK_PROF build, cold and code-warm, and the blocks' timeline) of the five decode
# shapes whose targets are missed, on the plan config of the decode table (48K / 12-bit / 1024
# threads, paths chosen by the launch plan). Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
source benchmarks/records/device_env.sh
timeout 240 python3 benchmarks/topk/profile_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 \
  --budget 48K --bits 12 --threads 1024 --split auto --cluster auto --resident auto --reps 10 \
  --blocks-csv $OUT/profile_blocks.csv > $OUT/profile.log 2>&1; echo "== profile rc=$?"; cat $OUT/profile.log; el
cd benchmarks && timeout 30 python3 read_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 2>&1 | tail -6 \
  | tee $OUT/read_probe.log; el
