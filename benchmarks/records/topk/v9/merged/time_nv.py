# Run on the H200 (2026-12-01 ~09:33 UTC): v8 (PYTHONPATH of a wheel of e0d7e4c) against v9 (wheel of
# 5b8c097) at the bench's best configs, and two overflow cases; argv[2] a patched topk.cuh: "b" = the
# warp-uniform store only where SPLIT, "c" = b with TOPK_WARP_RECONVERGE only where SPLIT. Two rounds
# of: v8, cur (5b8c097 as is), b, c. Output: time_nonsplit_variants.log.
import sys, torch
from occtune.kernels import topk as tk
from occtune.engine.bench import BenchTimer
if len(sys.argv) > 2:
    src = open(sys.argv[2]).read()
    tk.read_source = lambda: src
t = BenchTimer(rep_ms=60, warmup_ms=20)
cases = [((256, 1 << 17), 32768, 512, 12), ((64, 1 << 17), 32768, 1024, 12), ((64, 8192), 32768, 1024, 12),
         ((8, 1 << 17), 32768, 512, 12), ((256, 1 << 20), 49152, 512, 12), ((1, 1 << 20), 49152, 1024, 12),
         ((64, 1 << 20), 40960, 512, 8), ((1, 1 << 20), 32768, 512, 8)]
kern = {}
for (B, L), bud, thr, bits in cases:
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(B, L, device="cuda", generator=g)
    k = kern.get((bud, thr, bits)) or kern.setdefault((bud, thr, bits), tk.build(bud, thr, bits))
    refv = torch.topk(x, 2048, dim=1).values.sort(dim=1).values
    idx, diag = tk.topk(x, 2048, kernel=k, return_diagnostics=True); torch.cuda.synchronize()
    got = torch.gather(x, 1, idx.long()).sort(dim=1).values
    ok = bool(torch.equal(got, refv)) and all(len(set(r)) == 2048 for r in idx.cpu().tolist())
    flags = " ".join(f"{n.removesuffix('_rows')}={diag[n]}" for n in getattr(tk, "ROW_FLAGS", ()) if diag.get(n))
    r = t(lambda: tk.topk(x, 2048, kernel=k))
    print(f"{sys.argv[1]:5s} B={B:3d} L={L:7d} {bud // 1024}K/{thr}/{bits}: {r.median_us:7.1f} us (iqr {r.iqr_us:.1f}) "
          f"split={diag['split']} cluster={diag['cluster']} exact={ok} {flags}", flush=True)
