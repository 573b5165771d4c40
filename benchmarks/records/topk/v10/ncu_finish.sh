#!/usr/bin/env bash
# H200 (2026-12-01): Nsight Compute's per-instruction stall samples of the split plan's finish
# kernel (topk_transform_kernel, presplit) at (1, 1M), K=2048, 32 KiB, 512 threads, 12-bit
# (clean) and 8-bit (bin t narrowed over the kept list). Output: ncu_finish_<bits>.csv (source
# page, SASS) and ncu_finish_<bits>.txt (details). Needs the wheel installed (PYTHONPATH).
set -u
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
for BITS in 12 8; do
  cat > /tmp/ncu_app.py <<PY
import torch
from occtune.kernels import topk as tk
x = torch.randn(1, 1 << 20, device="cuda", generator=torch.Generator(device="cuda").manual_seed(3))
k = tk.build(32768, 512, $BITS)
for _ in range(4):
    tk.topk(x, 2048, kernel=k)
torch.cuda.synchronize()
PY
  timeout 200 "$NCU" --clock-control none -k regex:topk_transform --launch-skip 2 --launch-count 1 \
      --section WarpStateStats --section SourceCounters --section SpeedOfLight --section LaunchStats \
      -o /tmp/ncu_$BITS -f python3 /tmp/ncu_app.py > "$OUT/ncu_finish_${BITS}_run.log" 2>&1
  "$NCU" -i /tmp/ncu_$BITS.ncu-rep --page details > "$OUT/ncu_finish_$BITS.txt" 2>&1
  "$NCU" -i /tmp/ncu_$BITS.ncu-rep --page source --print-source sass --csv > "$OUT/ncu_finish_$BITS.csv" 2>&1
  echo "bits=$BITS: $(wc -l < "$OUT/ncu_finish_$BITS.csv") lines"
done
