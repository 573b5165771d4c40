# Compile one top-k cluster kernel through torch's NVRTC path and print the seconds; run twice in two
# processes to see whether CUDA keeps compiled kernels across processes (benchmarks/records/sweep_speed/cuda_cache_probe.txt).
import sys, time
from torch.cuda import _utils
from occtune.kernels import topk as tk
from occtune import rtc
opts = rtc.build_options({**tk.defines(36864, 512, 12), "TOPK_CLUSTER": 5})
t = time.time(); b, m = _utils._nvrtc_compile(tk.read_source(), tk.CLUSTER_KERNEL_NAME, "90", None, opts)
print(sys.argv[1], "cluster compile", round(time.time() - t, 2), "s")
