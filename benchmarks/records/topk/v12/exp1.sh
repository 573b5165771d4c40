#!/usr/bin/env bash
# H200, one call: the native launcher (checks, GPU serving tests, host probe against cuda-python
# in the same install, OCCTUNE_NATIVE_LAUNCH=0), forced cluster sizes 8/12/16 at small B, (64,128K)
# at 256 threads, the cluster-kernel GPU tests (S = 2, 3, 4, 16), and forced splits at B=256.
# Output under $OUT: summary in stdout; logs; csvs.tar.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
mkdir -p "$OUT/csv"
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys,torch,sysconfig,os;print(sys.version.split()[0],torch.__version__);i=sysconfig.get_paths()['include'];print(i,os.path.exists(i+'/Python.h'))"
python3 -c "from occtune import native, rtc; print('native', native.module(), native.error()); print('api', rtc._driver_api())"
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 150 python3 -m pytest -q -x tests/gpu/test_topk_serving_gpu.py > "$OUT/serve_tests.log" 2>&1
echo "serve tests rc=$?"; tail -2 "$OUT/serve_tests.log"; el
for i in 1 2; do for m in 1 0; do
  echo "### OCCTUNE_NATIVE_LAUNCH=$m round $i" >> "$OUT/host_probe.log"
  OCCTUNE_NATIVE_LAUNCH=$m timeout 90 python3 benchmarks/host_probe.py >> "$OUT/host_probe.log" 2>&1
done; done
grep -E "^###|^B=|  ours |one driver|output alloc|torch.topk" "$OUT/host_probe.log"; el
B="python3 benchmarks/bench_topk.py --budgets 32K --bits 12 --reps 15 --serve-calls 100"
timeout 300 $B --shapes 8x131072,16x131072,4x131072,16x1048576 --threads 512,1024 --compare-all --clusters 8,12,16 \
  --out "$OUT/csv/clusters.csv" > "$OUT/bench.log" 2>&1; echo "clusters rc=$?"; el
timeout 90 $B --shapes 64x131072 --threads 256,512,1024 --no-split-compare --out "$OUT/csv/t256.csv" >> "$OUT/bench.log" 2>&1
echo "t256 rc=$?"; el
grep '^B=' "$OUT/bench.log" | cut -c1-150
timeout 240 python3 -m pytest -v -x tests/gpu/test_topk_gpu.py -k "cluster_kernel_families or overflow_fallback_1m" > "$OUT/cluster_tests.log" 2>&1
echo "cluster tests rc=$?"; grep -c PASSED "$OUT/cluster_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/cluster_tests.log" | tail -3; el
timeout 120 $B --shapes 256x131072,256x1048576 --threads 512 --splits 2,4 --reps 8 --serve-calls 20 \
  --out "$OUT/csv/split256.csv" > "$OUT/split256.log" 2>&1; echo "split256 rc=$?"; grep '^B=' "$OUT/split256.log" | cut -c1-150; el
tar -cf "$OUT/csvs.tar" -C "$OUT" csv && rm -rf "$OUT/csv"
