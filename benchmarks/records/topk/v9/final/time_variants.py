# Run on the H200 (2026-12-01 ~09:03 and ~09:06 UTC): clean rows and two overflow cases per kernel
# variant; one installed package per process (PYTHONPATH=/tmp/s_main: main e0d7e4c, kernel v8;
# /tmp/s_ovf: branch overflow), label argv[1], optional kernel source file argv[2] (the variants of
# variants_time.log: v9 = 481b6d2's topk.cuh, v9sync = + __syncwarp at the keep-pass loop top,
# v9uni = + the uniform store, v9uni_sync = both). Output: time.log, variants_time.log.
import sys, torch
from occtune.kernels import topk as tk
from occtune.engine.bench import BenchTimer
if len(sys.argv) > 2:
    src = open(sys.argv[2]).read()
    tk.read_source = lambda: src
t = BenchTimer(rep_ms=60, warmup_ms=20)
cases = [((64, 8192), 12), ((64, 1 << 17), 12), ((256, 1 << 17), 12), ((8, 1 << 17), 12),
         ((64, 1 << 20), 12), ((256, 1 << 20), 12), ((64, 1 << 20), 8), ((256, 1 << 20), 8)]
kern = {}
for (B, L), bits in cases:
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(B, L, device="cuda", generator=g)
    k = kern.get(bits) or kern.setdefault(bits, tk.build(40960, 512, bits))
    refv = torch.topk(x, 2048, dim=1).values.sort(dim=1).values
    idx, diag = tk.topk(x, 2048, kernel=k, return_diagnostics=True); torch.cuda.synchronize()
    got = torch.gather(x, 1, idx.long()).sort(dim=1).values
    ok = bool(torch.equal(got, refv)) and all(len(set(r)) == 2048 for r in idx.cpu().tolist())
    flags = " ".join(f"{n.removesuffix('_rows')}={diag[n]}" for n in getattr(tk, "ROW_FLAGS", ()) if diag.get(n))
    r = t(lambda: tk.topk(x, 2048, kernel=k))
    print(f"{sys.argv[1]:11s} B={B:3d} L={L:7d} {bits:2d}-bit 40K: {r.median_us:7.1f} us (iqr {r.iqr_us:.1f}) "
          f"exact={ok} {flags}", flush=True)
