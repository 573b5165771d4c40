#!/usr/bin/env bash
# H200, call 1 of issue 33: the resident kernel's exactness (its GPU tests and the suite's tests that
# now take it), then the decode table (bench_topk.py, read-once probe beside each shape) and the
# host probe. Every stage under a time limit (a wrong spin barrier would hang).
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
R=benchmarks/records/topk_decode
timeout 120 python3 benchmarks/topk/prebuild.py 98304:512:8:resident 98304:1024:12:resident 38912:512:8:resident \
  38912:1024:12:resident 32768:512:8:resident 32768:1024:12:resident,split 4096:512:8:resident \
  4096:1024:12:resident 40960:512:12:resident 8192:512:12:resident 16384:512:12:resident \
  32768:512:12:resident,split,cluster8,cluster8r 40960:1024:12:resident 49152:512:12:resident \
  49152:1024:12:resident 2>&1 | tee $OUT/prebuild.log; el
timeout 150 python3 -m pytest -q -x tests/gpu/test_topk_resident_gpu.py 2>&1 | tee $OUT/resident_tests.log | tail -15; el
timeout 170 python3 benchmarks/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576 \
  --budgets 32K,40K,48K --bits 12 --threads 512,1024 --reps 15 --serve-calls 200 \
  --out $OUT/decode_bench.csv 2>&1 | tee $OUT/decode_bench.log | tail -32; el
timeout 60 python3 benchmarks/host_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576 --budget 40960 --threads 1024 \
  --calls 300 2>&1 | tee $OUT/host_probe.log | tail -45; el
