#!/usr/bin/env bash
# H200, the session's last call: the GPU tests of the merged main (the regrouped package, the
# pipeline, the FP8 decode path and op, the resident top-k kernel with topk.cuh in parts), each
# stage under its own limit, most important first. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
stage() { local name=$1 limit=$2; shift 2; timeout "$limit" python3 -m pytest -q -p no:cacheprovider "$@" \
          > "$OUT/$name.log" 2>&1; echo "== $name rc=$?"; tail -n 3 "$OUT/$name.log"; el; }
timeout 40 python3 benchmarks/topk/prebuild.py 98304:512:8:resident 98304:1024:12:resident \
  38912:512:8:resident 38912:1024:12:resident 32768:512:8:resident 32768:1024:12:resident 4096:512:8:resident \
  4096:1024:12:resident 40960:512:12:resident 8192:512:12:resident 16384:512:12:resident \
  32768:512:12:resident,split,cluster2,cluster3,cluster4,cluster8r 49152:512:12:resident,split,cluster2 2>&1 | tail -2; el
stage resident 70 tests/gpu/test_topk_resident_gpu.py
stage serving 50 tests/gpu/test_topk_serving_gpu.py
stage fp8 110 tests/gpu/test_fp8_gemm_gpu.py
stage topk_subset 100 tests/gpu/test_topk_gpu.py -k "adversarial_cases_exact or overflow_path_exact or split_path_auto_exact or cluster_kernel_families or bin_overflow_narrowing_exact or one_million"
