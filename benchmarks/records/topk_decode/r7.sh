#!/usr/bin/env bash
# H200, issue 33 (ran as `bash .whl/r7.sh`; kept here as it ran): is test_split_path_auto_exact[8-1048576-None],
# which failed in r6, new? The same two tests on a wheel of 19b2aed (.whl/old/) and of d9d9e7e's code
# (.whl/), then the 39 GPU-suite tests r6 did not reach (r7_tests.txt, then .whl/rest.txt) on the
# latter; the kernels built alongside. Logs under $OUT.
set -u
OUT=${OUT:-out}
t0=$(date +%s); el() { echo "  [$(( $(date +%s) - t0 )) s]"; }
export PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0 OCCTUNE_RESULTS=$PWD/results
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/old .whl/old/occtune-*.whl
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
(PYTHONPATH=/tmp/site timeout 80 python3 benchmarks/topk/prebuild.py 32768:512:8:resident,split,cluster2,cluster4,cluster8,cluster16 \
  32768:512:12:resident,split,cluster2,cluster4,cluster8,cluster16,cluster8r 40960:512:8:resident,split,cluster2,cluster3,cluster4,cluster8,cluster16 \
  40960:512:12:resident,split,cluster2,cluster5 49152:512:12:resident,split,cluster2,cluster4,cluster8 49152:1024:12:resident,split,cluster2,cluster8r \
  > $OUT/prebuild.log 2>&1 &)
T="tests/topk/test_topk_gpu.py::test_split_path_auto_exact[8-1048576-None] tests/topk/test_topk_gpu.py::test_split_path_auto_exact[8-1048576-False]"
PYTHONPATH=/tmp/old timeout 100 python3 -m pytest -q -p no:cacheprovider -rf $T > $OUT/old_split.log 2>&1; echo "== old rc=$?"; grep -E "^E " $OUT/old_split.log | head -12; tail -4 $OUT/old_split.log; el
PYTHONPATH=/tmp/site timeout 100 python3 -m pytest -q -p no:cacheprovider -rf $T > $OUT/new_split.log 2>&1; echo "== new rc=$?"; grep -E "^E |Error|assert" $OUT/new_split.log | head -20; tail -5 $OUT/new_split.log; el
PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q -p no:cacheprovider -rf $(cat .whl/rest.txt) > $OUT/rest.log 2>&1; echo "== rest rc=$?"; tail -5 $OUT/rest.log; el; tail -2 $OUT/prebuild.log
