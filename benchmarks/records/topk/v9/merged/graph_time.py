# Run on the H200 (2026-12-01 ~09:50 UTC, one machine): GPU time per call back to back, as a serving
# loop runs them in a CUDA graph (no L2 flush, no host time): N calls captured in one graph,
# replayed; median of 15 replays / N. Two rounds per wheel, argv[1] the label: v9 = wheel of 5b8c097
# (graph_time_v9.log), then v8 = wheel of e0d7e4c (graph_time_v8.log; its first try had lost the
# wheel, that call's v8 lines are errors and were dropped).
import sys, torch
from occtune.kernels import topk as tk
cases = [((1, 8192), 32768, 1024), ((64, 8192), 32768, 1024), ((8, 1 << 17), 32768, 512),
         ((64, 1 << 17), 32768, 1024), ((256, 1 << 17), 32768, 512), ((1, 1 << 20), 49152, 1024),
         ((256, 1 << 20), 49152, 512)]
for (B, L), bud, thr in cases:
    try:
        x = torch.randn(B, L, device="cuda", generator=torch.Generator(device="cuda").manual_seed(1))
        k = tk.build(bud, thr, 12)
        N = 50 if B * L <= (1 << 24) else 10
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                tk.topk(x, 2048, kernel=k)
        torch.cuda.current_stream().wait_stream(s)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(N):
                out = tk.topk(x, 2048, kernel=k)
        g.replay()
        torch.cuda.synchronize()
        ok = bool(torch.equal(torch.gather(x, 1, out.long()).sort(dim=1).values,
                              torch.topk(x, 2048, dim=1).values.sort(dim=1).values))
        ts = []
        for _ in range(15):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            g.replay()
            e1.record()
            torch.cuda.synchronize()
            ts.append(e0.elapsed_time(e1) * 1000 / N)
        ts.sort()
        print(f"{sys.argv[1]:3s} B={B:3d} L={L:7d} {bud // 1024}K/{thr}: graph {ts[7]:7.2f} us/call "
              f"(p10 {ts[1]:.2f}, p90 {ts[13]:.2f}; {N} calls per replay) exact={ok}", flush=True)
        del g, out
        torch.cuda.empty_cache()
    except Exception as e:   # keep the other shapes' figures
        print(f"{sys.argv[1]} B={B} L={L}: error {type(e).__name__}: {str(e)[:200]}", flush=True)
