#!/usr/bin/env bash
# H200, issue 33: the rest of the checks of r9's kernel (same wheel): the cluster tests r9 did not
# reach before its time limit (r10_tests.txt: r9 ran the first 84 of `-k cluster`, all passed),
# then every test of the top-k GPU suite without "cluster" in its name (the split and one-block
# long-row paths share the changed keep pass and sample). Logs under $OUT.
set -u
cd "$(dirname "$0")/../../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
source benchmarks/records/device_env.sh
timeout 60 python3 benchmarks/topk/prebuild.py 40960:512:8:resident,split,cluster2,cluster3,cluster4,cluster8,cluster16 \
  32768:512:8:resident,split,cluster4 32768:512:12:resident,split,cluster4 49152:512:12:cluster2,cluster3,cluster4 \
  49152:1024:12:cluster2 4096:512:8:resident,split,cluster2,cluster8 16384:512:8:cluster5 2>&1 | tail -1; el
stage cluster_rest 150 -rf $(cat benchmarks/records/topk_decode/r10_tests.txt)
stage not_cluster 300 tests/topk/test_topk_gpu.py -k "not cluster"
