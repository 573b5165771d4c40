#!/usr/bin/env bash
# H200, issue 33, small rows: the resident one-block kernel with the scan collect (working tree)
# against the same kernel before it (base/: HEAD's kernel sources), both paths, exact first.
# As run: working tree = 2cd5cdd + scan_collect.patch (no DIAG_* macro); base/ = 2cd5cdd's
# kernels/topk/*.cuh (not kept: `git show 2cd5cdd:kernels/topk/<file>`).
set -u
cd "$(dirname "$0")/../../.."
R=benchmarks/records/topk_small
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
cp -r /tmp/site /tmp/site_base && cp $R/base/*.cuh /tmp/site_base/occtune/kernels/topk/
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
cd benchmarks
PYTHONPATH=/tmp/site OCCTUNE_CACHE_DIR=/tmp/c_new timeout 200 python3 ../$R/exp1.py new 2>&1 | tee $OUT/exp_new.csv; el
PYTHONPATH=/tmp/site_base OCCTUNE_CACHE_DIR=/tmp/c_base timeout 160 python3 ../$R/exp1.py base 2>&1 | tee $OUT/exp_base.csv; el
for v in site site_base; do
  PYTHONPATH=/tmp/$v OCCTUNE_CACHE_DIR=/tmp/c_$v timeout 60 python3 topk/profile_topk.py --shapes 1x8192,64x8192 \
    --budget 48K --bits 12 --threads 1024,512 --resident on,off --reps 10 2>&1 | tee $OUT/profile_$v.log | grep -v "^#"; el
done
PYTHONPATH=/tmp/site timeout 40 python3 read_probe.py --shapes 1x8192,64x8192,1x16384,16x16384 2>&1 | tail -8 | tee $OUT/read_probe.log; el
