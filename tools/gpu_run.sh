#!/usr/bin/env bash
# One call on a lent GPU machine: run the named stages, logging each under $OUT (or ./out).
# Usage: bash tools/gpu_run.sh install env gpu_tests sweep:rope topk_bench ...
# `install` puts the wheel carried in .whl/ (built here: pip wheel --no-deps -w .whl . and
# git describe --always --dirty > .whl/REVISION) on PYTHONPATH:
# the checkout's folders are the `occtune` package only once installed.
# What comes back under $OUT goes to results/<target>/ only if users consume it (a results file,
# an export, the benchmark table behind them: add its row to results/README.md); logs, profiles
# and scripts of an experiment go to benchmarks/records/<topic>/, and only if a doc cites them.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 TRITON_INTERPRET=0 OCCTUNE_CACHE_DIR=${OCCTUNE_CACHE_DIR:-/tmp/occtune-cache}
stage() { local name=$1; shift; echo "=== $name: $*"; local t0=$(date +%s)
          timeout "${STAGE_TIMEOUT:-280}" "$@" > "$OUT/$name.log" 2>&1; local rc=$?
          echo "=== $name rc=$rc $(( $(date +%s) - t0 ))s"; tail -n "${TAIL:-25}" "$OUT/$name.log"; }
for s in "$@"; do
  case $s in
    install) python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/occtune-*.whl \
               && export PYTHONPATH=/tmp/site:${PYTHONPATH:-} OCCTUNE_GIT_REVISION=$(cat .whl/REVISION 2>/dev/null) \
               && echo "=== install: $(ls .whl/occtune-*.whl) (revision ${OCCTUNE_GIT_REVISION:-unknown})";;
    gpu_tests) STAGE_TIMEOUT=${GPU_TESTS_TIMEOUT:-580} stage gpu_tests python3 -m pytest -q -m gpu tests/*/test_*_gpu.py;;
    sweep:*) stage "sweep_${s#sweep:}" python3 -m occtune sweep "${s#sweep:}" --out "$OUT/results" ${SWEEP_ARGS:-};;
    env) stage env bash -c 'nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv; python3 -c "import torch,triton,sys;print(sys.version);print(torch.__version__,torch.version.cuda,triton.__version__);p=torch.cuda.get_device_properties(0);print(p)"';;
    topk_tests) STAGE_TIMEOUT=${TOPK_TESTS_TIMEOUT:-420} stage topk_tests python3 -m pytest -q tests/topk/test_topk_gpu.py;;
    topk_tests_k) stage topk_tests_k python3 -m pytest -q -x tests/topk/test_topk_gpu.py -k "${TESTS_K:-cluster}";;
    topk_bench_quick) stage topk_bench_quick python3 benchmarks/topk/bench_topk.py --shapes "${BENCH_SHAPES:-64x131072,256x131072,256x1048576,8x131072}" --budgets "${BENCH_BUDGETS:-32K,48K}" --bits "${BENCH_BITS:-8,12}" --out "$OUT/topk_bench_quick.csv";;
    fp8_tests) stage fp8_tests python3 -m pytest -q -rs -rx tests/fp8_gemm/test_fp8_gemm_gpu.py;;
    fp8_bench) stage fp8_bench python3 benchmarks/fp8_gemm/bench_fp8_gemm.py --out-dir "$OUT/fp8" ${FP8_BENCH_ARGS:-};;
    fp8_cand) STAGE_TIMEOUT=${FP8_CAND_TIMEOUT:-420} TAIL=60 stage fp8_cand python3 benchmarks/fp8_gemm/bench_fp8_gemm.py --m 1024,4096,16384 \
                --backends triton,torch_scaled_mm --rep-ms 10 --warmup-ms 3 --smoke-s 90 --out-dir "$OUT/fp8_cand" ${FP8_CAND_ARGS:-};;
    fp8_tune) stage fp8_tune python3 -m occtune fp8-gemm --out "$OUT/results" --export "$OUT/fp8_export" ${FP8_TUNE_ARGS:-};;
    rope_tests) stage rope_tests python3 -m pytest -q -x tests/rope/test_rope.py;;
    engine_tests) stage engine_tests python3 -m pytest -q tests/engine/test_engine_gpu.py;;
    engine_fast_tests) stage engine_fast_tests python3 -m pytest -q -rs tests/engine/test_engine_fast_gpu.py;;
    sweep_speed) STAGE_TIMEOUT=${SPEED_TIMEOUT:-570} TAIL=40 stage sweep_speed python3 benchmarks/engine/sweep_speed.py --out "$OUT/sweep_speed.json" ${SPEED_ARGS:-};;
    topk_bench) stage topk_bench python3 benchmarks/topk/bench_topk.py --out "$OUT/topk_bench.csv";;
    topk_serve) stage topk_serve_tests python3 -m pytest -q tests/topk/test_topk_serving_gpu.py
                stage host_probe python3 benchmarks/topk/host_probe.py
                stage topk_serve_bench python3 benchmarks/topk/bench_topk.py --shapes "${BENCH_SHAPES:-1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576}" --budgets 32K,48K --bits 12 --threads 512,1024 --reps 15 --serve-calls 300 --out "$OUT/topk_serve_bench.csv"
                stage topk_plan_check python3 benchmarks/topk/bench_topk.py --shapes 1x1048576,8x1048576 --budgets 32K --bits 8,12 --threads 512,1024 --compare-all --splits 16,32 --reps 15 --serve-calls 100 --out "$OUT/topk_plan_check.csv";;
    topk_overflow) stage topk_overflow_tests python3 -m pytest -q -s -rs tests/topk/test_topk_gpu.py -k "overflow or spill"
                   TAIL=${TAIL:-40} stage topk_overflow_bench python3 benchmarks/topk/bench_topk.py --shapes 64x1048576 --budgets 32K,40K --bits 8,12 --threads 512 --no-split-compare --reps 10 --serve-calls 20 --out "$OUT/topk_overflow_bench.csv"
                   TAIL=${TAIL:-40} stage topk_overflow_bench_plain python3 benchmarks/topk/bench_topk.py --shapes 64x65536 --budgets 32K --bits 8,12 --threads 512 --dist random_normal,one_bin_77,heavy_ties --no-split-compare --reps 10 --serve-calls 20 --out "$OUT/topk_overflow_bench_plain.csv";;
    rope_bench_quick) stage rope_bench_quick python3 benchmarks/rope/bench_rope.py --tokens 8192 --variants flat,tile,heads,batched --block-m 8,16,32 --num-warps 1,2,4 --out "$OUT/rope_bench_quick.csv";;
    rope_bench) stage rope_bench python3 benchmarks/rope/bench_rope.py --out "$OUT/rope_bench.csv";;
    engine_demo) stage engine_demo bash -c 'python3 examples/engine_demo.py --family axpy --device cuda --stability 10 --out "$OUT/demo-axpy" > "$OUT/demo-axpy.json" && python3 examples/engine_demo.py --family rope --device cuda --rep-ms 20 --workloads 4 --stability 10 --timeout 300 --out "$OUT/demo-rope" > "$OUT/demo-rope.json"; tail -c 1500 "$OUT/demo-rope.json"';;
    nv_occ) stage nv_occ python3 tools/collect_nvidia_occupancy.py;;
    topk_prof) stage topk_prof python3 benchmarks/topk/profile_topk.py ${PROF_ARGS:-};;
    topk_ncu) stage topk_ncu bash -c 'NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu | head -1); "$NCU" --clock-control none -k regex:topk_transform --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section Occupancy --section LaunchStats python3 -c "
import torch; from occtune.kernels import topk as tk
x = torch.randn(${NCU_B:-256}, ${NCU_L:-131072}, device=\"cuda\")
k = tk.build(32768, 512, 12)
for _ in range(4): tk.topk(x, 2048, kernel=k, split=${NCU_SPLIT:-None})
torch.cuda.synchronize()"';;
    *) echo "unknown stage $s";;
  esac
done
