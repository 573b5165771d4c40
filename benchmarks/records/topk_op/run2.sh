#!/usr/bin/env bash
# H200, issues 32 and 33: the ops' C++ kernels on the shared plan_launch.h. Builds both, runs the
# top-k serving GPU tests and the FP8 GEMM serving/op GPU tests, then both host probes.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
( time python3 -c "
import occtune.kernels.topk.op as t, occtune.kernels.fp8_gemm.op as f
print('topk op:', t.native_error() or 'C++', '| fp8 ops:', f.native_error() or 'C++')" ) 2>&1 | tee $OUT/build.log
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/topk/test_topk_serving_gpu.py 2>&1 | tail -4 | tee $OUT/pytest_topk.log
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/fp8_gemm/test_fp8_gemm_gpu.py -k "op or public or plans or one_pass" 2>&1 | tail -25 | tee $OUT/pytest_fp8.log
cd benchmarks
timeout 100 python3 topk/host_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576 \
  --budget 49152 --threads 1024 --calls 300 2>&1 | tee $OUT/topk_host_probe.log
timeout 150 python3 fp8_gemm/fp8_host_probe.py 2>&1 | tee $OUT/fp8_host_probe.log
