# v8 against v9 on clean random rows: run once per installed wheel (argument: its label), rounds interleaved
# (v8, v9, v8, v9) on the H200, 2026-12-01 ~07:12 UTC; output quoted in README.md here.
import sys, torch
from occtune.kernels import topk as tk
from occtune.engine.bench import BenchTimer
t = BenchTimer(rep_ms=60, warmup_ms=20)
for B, L in ((64, 1 << 20), (64, 1 << 17), (256, 1 << 17), (8, 1 << 17), (256, 1 << 20), (64, 8192)):
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(B, L, device="cuda", generator=g)
    for bud in (40960, 49152):
        k = tk.build(bud, 512, 12)
        tk.topk(x, 2048, kernel=k); torch.cuda.synchronize()
        r = t(lambda: tk.topk(x, 2048, kernel=k))
        print(f"{sys.argv[1]} B={B} L={L} {bud//1024}K: {r.median_us:.1f} us (iqr {r.iqr_us:.1f})", flush=True)
