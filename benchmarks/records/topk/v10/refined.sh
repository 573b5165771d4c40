#!/usr/bin/env bash
# H200: the refined sample floor (branch refined-floor, 7e09354) against e343586 (.whl/old):
# (64,1M) 8/12-bit and (64,128K) 12-bit at 32 KiB / 512 threads (cluster 3), then the top-k GPU
# suite on 7e09354. Output under $OUT: new.log, old.log, topk_tests.log.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site_old .whl/old/occtune-*.whl
export PYTHONUNBUFFERED=1
B="benchmarks/bench_topk.py --budgets 32K --threads 512 --no-split-compare --reps 10 --serve-calls 10"
PYTHONPATH=/tmp/site timeout 50 python3 $B --shapes 64x1048576,64x131072 --bits 8,12 --out $OUT/new.csv > $OUT/new.log 2>&1; echo "new rc=$?"
PYTHONPATH=/tmp/site_old timeout 30 python3 $B --shapes 64x1048576,64x131072 --bits 12 --out $OUT/old.csv > $OUT/old.log 2>&1; echo "old rc=$?"
grep '^B=' $OUT/new.log $OUT/old.log | cut -c1-130; grep -A4 'overflow check' $OUT/new.log
PYTHONPATH=/tmp/site timeout 200 python3 -m pytest -q -x tests/gpu/test_topk_gpu.py > $OUT/topk_tests.log 2>&1; echo "tests rc=$?"; tail -n 3 $OUT/topk_tests.log
