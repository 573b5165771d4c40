#!/usr/bin/env bash
# H200, issue 33: GPU tests of the ops' C++ kernels as of c77cc3f (never GPU-run), then exp1 (the
# cluster kernel's register path on rows that are not long) and the read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
export OCCTUNE_RESULTS=$PWD/results
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
stage() { local name=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" \
          > "$OUT/$name.log" 2>&1; echo "== $name rc=$?"; tail -n 3 "$OUT/$name.log"; el; }
stage topk_op 150 tests/topk/test_topk_serving_gpu.py -k op
stage fp8_op 150 tests/fp8_gemm/test_fp8_gemm_gpu.py -k op
cd benchmarks && timeout 200 python3 records/topk_cshort/exp1.py > $OUT/exp1.csv 2> $OUT/exp1.err; echo "== exp1 rc=$?"
cat $OUT/exp1.csv; tail -3 $OUT/exp1.err; el
timeout 40 python3 read_probe.py --shapes 1x8192,64x8192,132x8192,1x16384,8x131072,64x131072 2>&1 | tail -7 | tee $OUT/read_probe.log; el
