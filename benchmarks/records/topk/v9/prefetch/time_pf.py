# Run on the H200 (2026-12-01 ~09:19 UTC), wheel of 3852990 (branch overflow) on PYTHONPATH, with
# src/v9pf.cuh = kernels/topk/topk.cuh + l2_prefetch.patch: each block bulk-prefetches the first
# TOPK_L2_PREFETCH bytes (argv[1]; 0 = off) of its slice into the L2 before the sample. time_pf.log:
# two rounds of `for pf in 0 65536 262144 4194304; do python3 time_pf.py $pf; done`.
import os, sys, torch
from occtune.kernels import topk as tk
from occtune.engine.bench import BenchTimer
pf = int(sys.argv[1])
src = open("src/v9pf.cuh").read()
if pf:
    src = f"#define TOPK_L2_PREFETCH {pf}\n" + src
tk.read_source = lambda: src
t = BenchTimer(rep_ms=60, warmup_ms=20)
cases = [((8, 1 << 17), 40960, 512), ((64, 1 << 17), 40960, 512), ((64, 1 << 17), 49152, 1024),
         ((256, 1 << 17), 40960, 512), ((256, 1 << 17), 49152, 512), ((64, 1 << 20), 40960, 512),
         ((256, 1 << 20), 40960, 512), ((64, 8192), 40960, 512)]
kern = {}
for (B, L), bud, thr in cases:
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(B, L, device="cuda", generator=g)
    k = kern.get((bud, thr)) or kern.setdefault((bud, thr), tk.build(bud, thr, 12))
    refv = torch.topk(x, 2048, dim=1).values.sort(dim=1).values
    idx, diag = tk.topk(x, 2048, kernel=k, return_diagnostics=True); torch.cuda.synchronize()
    got = torch.gather(x, 1, idx.long()).sort(dim=1).values
    ok = bool(torch.equal(got, refv)) and all(len(set(r)) == 2048 for r in idx.cpu().tolist())
    r = t(lambda: tk.topk(x, 2048, kernel=k))
    print(f"pf={pf:8d} B={B:3d} L={L:7d} {bud // 1024}K/{thr}: {r.median_us:7.1f} us (iqr {r.iqr_us:.1f}) "
          f"split={diag['split']} cluster={diag['cluster']} exact={ok}", flush=True)
