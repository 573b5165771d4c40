#!/usr/bin/env bash
# H200, call 3 of issue 33: the resident kernel's tests after the spread collect's prefilter, then
# issue 33's table on all eight shapes from one loan with the committed per-workload defaults
# (OCCTUNE_RESULTS: the checkout's results/, which the installed wheel does not carry), and the
# (1, 1M) phase profile. Long shapes first: the run has a hard limit.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
export OCCTUNE_RESULTS=$PWD/results
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
R=benchmarks/records/topk_decode
timeout 40 python3 benchmarks/topk/prebuild.py 98304:512:8:resident 98304:1024:12:resident 38912:512:8:resident \
  38912:1024:12:resident 32768:512:8:resident 32768:1024:12:resident 4096:512:8:resident 4096:1024:12:resident \
  40960:512:12:resident 8192:512:12:resident 16384:512:12:resident \
  32768:512:12:resident,split,cluster2,cluster3,cluster4,cluster8r 40960:1024:12:resident \
  49152:512:12:resident,split,cluster2,cluster3,cluster4 49152:1024:12:resident,split 2>&1 | tail -2; el
timeout 25 python3 -m pytest -q tests/gpu/test_topk_resident_gpu.py > $OUT/tests.log 2>&1; tail -2 $OUT/tests.log; el
timeout 50 python3 benchmarks/bench_topk.py --shapes 8x131072,64x131072,256x131072,64x1048576,256x1048576 \
  --budgets 32K,48K --bits 12 --threads 512 --no-split-compare --default --reps 8 --serve-calls 30 \
  --out $OUT/long_bench.csv > $OUT/long_bench.log 2>&1; tail -9 $OUT/long_bench.log; el
timeout 25 python3 benchmarks/bench_topk.py --shapes 1x8192,64x8192,1x1048576 --budgets 48K --bits 12 \
  --threads 512,1024 --compare-all --default --reps 10 --serve-calls 50 --out $OUT/decode_bench.csv \
  > $OUT/decode_bench.log 2>&1; tail -7 $OUT/decode_bench.log; el
timeout 12 python3 benchmarks/profile_topk.py --shapes 1x1048576 --budget 48K --bits 12 --threads 512 \
  --split auto --resident auto --reps 8 2>&1 | tee $OUT/profile.log | grep -v "^#"; el
