#!/usr/bin/env bash
# H200, issue 32: the FP8 GEMM ops' C++ kernels after run2 (PIPE 1-3 launched from C++ too, their
# global scratch in the call's workspace): the FP8 serving/op GPU tests, the FP8 host probe at
# (7168, 2048), M = 8 and 1024.
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/fp8_gemm/test_fp8_gemm_gpu.py -k "op or public or plans or one_pass" 2>&1 | tail -25 | tee $OUT/pytest_fp8.log
cd benchmarks && timeout 150 python3 fp8_gemm/fp8_host_probe.py 2>&1 | tee $OUT/fp8_host_probe.log
