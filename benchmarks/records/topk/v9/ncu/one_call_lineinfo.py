# The profiled call: (64, 128K) random rows, 40 KiB, 512 threads, 12-bit, kernels built with -lineinfo. Run as
# ncu --clock-control none -k regex:topk_cluster --launch-skip 2 --launch-count 1 --section SourceCounters
#     --section InstructionStats --import-source yes --source-folders DIR --page source --print-source cuda,sass --csv
#     python3 one_call_lineinfo.py   (DIR holds topk.cuh copied as topk_cluster_kernel.cu, NVRTC's name for it)
import torch
from occtune import rtc
_orig = rtc.build_options
rtc.build_options = lambda d, extra=None: _orig(d, extra) + ["-lineinfo"]
from occtune.kernels import topk as tk
x = torch.randn(64, 1 << 17, device="cuda"); k = tk.build(40960, 512, 12)
for _ in range(4): tk.topk(x, 2048, kernel=k)
torch.cuda.synchronize()
