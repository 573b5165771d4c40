#!/usr/bin/env bash
# H200, issue 33, small rows, call 2: where the one-block resident kernel's collect phase (3.5 us of
# an 8K row, with or without shared atomics: exp1) goes. Diagnostic builds of the scan collect
# (diag/topk_resident.cuh, never shipped; as run: 2cd5cdd + scan_collect.patch, whose DIAG_*
# switches it holds): no output stores, outputs staged in LDS then copied,
# no index transform, no collect at all. Phase profile of each, code warm.
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_small
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
cp -r /tmp/site /tmp/site_diag && cp $R/diag/topk_resident.cuh /tmp/site_diag/occtune/kernels/topk/
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
cd benchmarks
for d in NONE NOSTORE STAGE NOAPPLY SKIP; do
  echo "== DIAG_$d"
  PYTHONPATH=/tmp/site_diag OCCTUNE_CACHE_DIR=/tmp/c_$d timeout 60 python3 topk/profile_topk.py \
    --shapes 1x8192,64x8192 --budget 48K --bits 12 --threads 1024 --resident on --define DIAG_$d=1 \
    --reps 10 2>&1 | grep -v "^#" | grep -v timeline; el
done 2>&1 | tee $OUT/diag.log
cd ..
if command -v cuobjdump >/dev/null; then
  PYTHONPATH=/tmp/site python3 -c "from occtune.kernels import topk as tk; open('/tmp/k.cu','w').write(tk.read_source())"
  nvcc -arch=sm_90 -cubin -o /tmp/k.cubin -DSGL_TOPK_DYNAMIC_SMEM_BYTES=49152 -DTOPK_THREADS=1024 \
    -DTOPK_COARSE_BITS=12 -DTOPK_RESIDENT=1 -DTOPK_PROF=1 /tmp/k.cu 2>/dev/null && \
    cuobjdump -sass -fun topk_resident_kernel /tmp/k.cubin > $OUT/resident_prof.sass; ls -la $OUT; el
fi
