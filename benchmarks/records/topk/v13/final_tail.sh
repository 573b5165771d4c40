#!/usr/bin/env bash
# H200, the same warm machine as final.sh: the top-k GPU suite's last 10 tests (final.sh's run
# of the suite stopped at its 330 s limit after 149 passed, none failed).
set -u
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
[ -d /tmp/site/occtune ] || python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
echo "revision $(cat .whl/REVISION)"
timeout 280 python3 -m pytest -v tests/gpu/test_topk_gpu.py -k "cluster_bin_overflow_families or split_list_overflow_1m_flagged" > "$OUT/topk_tests_tail.log" 2>&1
echo "rc=$?"; grep -E "PASSED|FAILED|passed|failed" "$OUT/topk_tests_tail.log" | tail -12
