#!/usr/bin/env bash
# H200, issue 33: the register path's bin-t overflow narrowed in registers (topk_cluster_regs_narrow)
# instead of block 0's plain path / the sampled path. The short-row and register-path GPU tests
# (every family, flags: no row pass, no replay), then the decode benchmark with random, all-equal
# and heavy-tie rows (the overflow check) and the read-once probe. Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
source benchmarks/records/device_env.sh
stage regs_tests 190 tests/topk/test_topk_gpu.py -k "short_rows or register_path"
cd benchmarks && timeout 130 python3 topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072,1x16384,16x16384,1x65536 \
  --budgets 48K --bits 12 --threads 1024 --reps 10 --default --no-split-compare --dist random_normal,all_equal,heavy_ties \
  --serve-calls 50 --out $OUT/bench.csv > $OUT/bench.log 2>&1; echo "== bench rc=$?"; grep -v "^#" $OUT/bench.log | tail -48; el
timeout 30 python3 read_probe.py --shapes 1x8192,64x8192,8x131072,1x1048576,64x131072,1x16384,16x16384,1x65536 2>&1 | tail -9 | tee $OUT/read_probe.log; el
