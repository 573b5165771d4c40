#!/usr/bin/env bash
# H200, issue 33: the shipped change (one-block rows on the resident kernel's lean collect): the
# top-k GPU suite, the resident and serving tests, then the decode benchmark with the committed
# per-workload defaults and the read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
export OCCTUNE_RESULTS=$PWD/results
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
stage() { local name=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" \
          > "$OUT/$name.log" 2>&1; echo "== $name rc=$?"; tail -n 3 "$OUT/$name.log"; el; }
timeout 60 python3 benchmarks/topk/prebuild.py 40960:512:8:resident,split,cluster2,cluster3,cluster4,cluster8,cluster16 \
  40960:512:12:resident,split,cluster2,cluster5 40960:256:12:cluster2 4096:512:8:resident 32768:512:8:resident,split,cluster2,cluster4,cluster8 \
  32768:512:12:resident,split,cluster2,cluster4,cluster8,cluster8r 32768:256:12:cluster8 32768:1024:12:resident,cluster8 \
  49152:512:8:resident,split,cluster2,cluster4,cluster8 49152:512:12:resident,split,cluster2,cluster4,cluster8 \
  49152:1024:12:resident,split 98304:512:8:resident 98304:1024:12:resident 38912:512:8:resident 38912:1024:12:resident \
  8192:512:12:resident 16384:512:12:resident 40960:1024:12:resident 2>&1 | tail -2; el
stage topk_gpu 260 tests/topk/test_topk_gpu.py
stage resident 60 tests/topk/test_topk_resident_gpu.py
stage serving 60 tests/topk/test_topk_serving_gpu.py
cd benchmarks && timeout 90 python3 topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 \
  --budgets 48K --bits 12 --threads 1024,512 --reps 10 --default --no-split-compare --out $OUT/bench.csv \
  > $OUT/bench.log 2>&1; echo "== bench rc=$?"; grep -v "^#" $OUT/bench.log | tail -14; el
timeout 40 python3 read_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072 2>&1 | tail -6 | tee $OUT/read_probe.log; el
