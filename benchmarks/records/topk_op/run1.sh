#!/usr/bin/env bash
# H200, issue 33 item 3: torch.ops.occtune.topk with its C++ kernel (op_native.cpp). The GPU
# serving tests (the C++ op's tests among them), then the host probe of run8 (topk_regs).
set -u
cd "$(dirname "$0")/../../.."
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"; g++ --version | head -1
TI=$(python3 -c "import torch,os;print(os.path.dirname(torch.__file__))")/include; grep -n "native_handle" $TI/c10/core/Stream.h; grep -n "getStreamNativeHandle\|isStreamCapturing" $TI/c10/core/impl/DeviceGuardImplInterface.h
( time python3 -c "import occtune.kernels.topk.op as op; print('op kernel:', op.native_error() or 'C++')" ) 2>&1 | tee $OUT/build.log
timeout 300 python3 -m pytest -q -p no:cacheprovider tests/topk/test_topk_serving_gpu.py 2>&1 | tail -25 | tee $OUT/pytest.log
cd benchmarks && timeout 200 python3 topk/host_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576 \
  --budget 49152 --threads 1024 --calls 300 2>&1 | tee $OUT/host_probe.log
