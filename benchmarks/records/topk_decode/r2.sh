#!/usr/bin/env bash
# H200, call 2 of issue 33 (the final one): exactness (the resident kernel's tests, the suite's
# tests whose path changed, the serving suite: eager and captured graphs), issue 33's table from one
# loan (bench_topk.py: read-once probe beside every shape, the committed default beside the best),
# the host probe, and the phase profile of the shapes that miss. Every stage under a time limit.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
R=benchmarks/records/topk_decode
timeout 75 python3 benchmarks/topk/prebuild.py 98304:512:8:resident 98304:1024:12:resident 38912:512:8:resident \
  38912:1024:12:resident 32768:512:8:resident,split,cluster2,cluster3,cluster4,cluster8 \
  32768:1024:12:resident,split,cluster8r 4096:512:8:resident 4096:1024:12:resident 40960:512:8:resident \
  40960:512:12:resident,split 8192:512:12:resident 16384:512:12:resident 64:512:8 64:512:12 4096:512:12 \
  32768:512:12:resident,split,cluster2,cluster3,cluster4,cluster8,cluster8r 40960:1024:12:resident,split \
  49152:512:8:resident 49152:512:12:resident,split,cluster2,cluster3,cluster4 49152:1024:12:resident,split \
  131072:512:8:resident 131072:512:12:resident,cluster2,cluster3,cluster4 2>&1 | tee $OUT/prebuild.log; el
timeout 60 python3 -m pytest -q tests/gpu/test_topk_resident_gpu.py 2>&1 | tee -a $OUT/tests.log | tail -4; el
timeout 70 python3 benchmarks/bench_topk.py --shapes 1x8192,64x8192,1x1048576 --budgets 40K,48K --bits 12 \
  --threads 512,1024 --compare-all --default --reps 15 --serve-calls 200 --out $OUT/decode_bench.csv \
  > $OUT/decode_bench.log 2>&1; tail -9 $OUT/decode_bench.log; el
timeout 80 python3 benchmarks/bench_topk.py --shapes 8x131072,64x131072,256x131072,64x1048576,256x1048576 \
  --budgets 32K,48K --bits 12 --threads 512 --no-split-compare --default --reps 10 --serve-calls 50 \
  --out $OUT/long_bench.csv > $OUT/long_bench.log 2>&1; tail -9 $OUT/long_bench.log; el
timeout 30 python3 benchmarks/host_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576 --budget 49152 \
  --threads 1024 --calls 300 > $OUT/host_probe.log 2>&1; grep -E "^B=|^  ours  |torch.ops|graph" $OUT/host_probe.log; el
timeout 30 python3 benchmarks/profile_topk.py --shapes 1x8192,1x1048576 --budget 48K --bits 12 --threads 1024 \
  --split auto --resident auto,off --reps 10 2>&1 | tee $OUT/profile.log | grep -v "^#"; el
timeout 45 python3 -m pytest -q tests/gpu/test_topk_serving_gpu.py 2>&1 | tee -a $OUT/tests.log | tail -4; el
timeout 70 python3 -m pytest -q tests/gpu/test_topk_gpu.py -k "adversarial_cases_exact or overflow_path_exact or \
test_runtime_k or test_row_starts or page_table or ragged or narrowing or register_path_for_8" \
  2>&1 | tee -a $OUT/tests.log | tail -4; el
