#!/usr/bin/env bash
# H200, issue 33: exp4.py (flushed / warm / back-to-back times of the three one-block paths) and the
# SASS size of each build (nvcc + cuobjdump on the same source).
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_regs
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
timeout 90 python3 benchmarks/topk/prebuild.py 49152:1024:12:resident,residentr 49152:512:12:resident,residentr 2>&1 | tail -1; el
(cd benchmarks && timeout 200 python3 ../$R/exp4.py 2>&1 | tee $OUT/exp4.csv); el
python3 -c "from occtune.kernels.topk.runtime import read_source; open('/tmp/t.cu','w').write(read_source())"
for th in 1024 512; do for v in "" "-DTOPK_RESIDENT=1" "-DTOPK_RESIDENT=1 -DTOPK_RES_REGS=$((4096/th))"; do
  nvcc -arch=sm_90 -cubin -o /tmp/t.cubin -DSGL_TOPK_DYNAMIC_SMEM_BYTES=49152 -DTOPK_THREADS=$th -DTOPK_COARSE_BITS=12 $v /tmp/t.cu 2>/dev/null
  cuobjdump -sass /tmp/t.cubin | awk -v v="$th $v" '/Function :/{f=$3} /^ +\/\*[0-9a-f]+\*\//{n[f]++} END{for(k in n) print v, k, n[k], "instructions"}'
done; done 2>&1 | tee $OUT/sass_sizes.txt; el
