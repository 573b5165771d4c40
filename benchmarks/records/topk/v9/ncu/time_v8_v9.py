# Run on the H200 (2026-12-01 ~08:25 UTC), once per installed wheel: PYTHONPATH=/tmp/s_main (main 5ec5817,
# kernel v8) and /tmp/s_ovf (this branch, 640e1a6, kernel v9); output in README.md here.
# Clean random rows, v8 (main) vs v9 (overflow branch) vs v9 with topk_row_plain inlined; one
# installed package per process (PYTHONPATH), label in argv[1], "plain_inline" in argv[2] patches
# the source (CUDA only). Same engine timer as compare_v8_v9.py.
import sys, torch
from occtune.kernels import topk as tk
from occtune.engine.bench import BenchTimer
if len(sys.argv) > 2 and sys.argv[2] == "plain_inline":
    src = tk.read_source()
    new = src.replace("__device__ static TOPK_NOINLINE void topk_row_plain(", "__device__ static __forceinline__ void topk_row_plain(")
    assert new != src
    tk.read_source = lambda: new
t = BenchTimer(rep_ms=60, warmup_ms=20)
shapes = ((64, 8192), (64, 65536), (64, 1 << 17), (256, 1 << 17), (8, 1 << 17), (64, 1 << 20), (256, 1 << 20))
for B, L in shapes:
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(B, L, device="cuda", generator=g)
    k = tk.build(40960, 512, 12)
    ref = torch.topk(x, 2048, dim=1).values.min(dim=1).values
    idx = tk.topk(x, 2048, kernel=k); torch.cuda.synchronize()
    ok = bool((torch.gather(x, 1, idx.long()).min(dim=1).values == ref).all())
    r = t(lambda: tk.topk(x, 2048, kernel=k))
    print(f"{sys.argv[1]} B={B} L={L} 40K: {r.median_us:.1f} us (iqr {r.iqr_us:.1f}) exact_floor={ok}", flush=True)
