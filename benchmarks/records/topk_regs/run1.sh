#!/usr/bin/env bash
# H200, issue 33: the resident kernel's register path (short rows in one block's registers).
# Kernels compiled side by side first; the resident GPU tests (their one-block rows now take the
# register path); exp3.py (exact on every family, then timed); phase profiles; the read-once probe.
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 90 python3 benchmarks/topk/prebuild.py 49152:1024:12:resident,residentr 49152:512:12:resident,residentr \
  32768:1024:12:resident,residentr 32768:512:12:resident,residentr 40960:512:8:resident,residentr \
  16384:256:12:resident,residentr 2>&1 | tail -2; el
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/topk/test_topk_resident_gpu.py > $OUT/resident_tests.log 2>&1
echo "== resident tests rc=$?"; tail -n 5 $OUT/resident_tests.log; el
cd benchmarks
timeout 240 python3 ../$R/exp3.py 2>&1 | tee $OUT/exp3.csv; el
timeout 60 python3 topk/profile_topk.py --shapes 1x8192,64x8192,1x16384 --budget 48K --bits 12 \
  --threads 1024,512 --resident on,off --reps 10 2>&1 | tee $OUT/profile.log | grep -v "^#"; el
timeout 40 python3 read_probe.py --shapes 1x8192,64x8192,1x16384,16x16384,132x8192 2>&1 | tail -8 | tee $OUT/read_probe.log; el
