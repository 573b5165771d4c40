#!/usr/bin/env bash
# H200, one call: the GPU tests not in final2.sh whose forced clusters take the register path
# (S = 7 and 5 on 64K-70K rows), on main's kernel.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/site .whl/occtune-*.whl
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1 OCCTUNE_CACHE_DIR=/tmp/occtune-cache TRITON_INTERPRET=0
echo "revision $(cat .whl/REVISION)"
timeout 150 python3 -m pytest -v tests/gpu/test_topk_gpu.py -k "split_path_adversarial or row_starts_unaligned" > "$OUT/split_tests.log" 2>&1
echo "tests rc=$?"; grep -c PASSED "$OUT/split_tests.log"; grep -E "FAILED|Error|passed|failed" "$OUT/split_tests.log" | tail -4
