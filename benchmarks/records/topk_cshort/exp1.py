#!/usr/bin/env python3
"""Issue 33: the cluster kernel's register path for rows that are not long (8K-128K values over a
thread-block cluster of S blocks, R float4 a thread in registers, one read, one histogram merged
over DSMEM, bin t finished by block 0). Each config: exact on every adversarial family first, then
timed (engine timer, L2 flushed, median of 40) beside the shipped default (`topk(x, 2048)`).
One CSV line a run: B,L,S,threads,budget,R,ok,median_us,iqr_us,p90_us[,why]."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))
import torch  # noqa: E402

from harness import kernel_time  # noqa: E402
from occtune.build import rtc  # noqa: E402
from occtune.build.rtc import ArgPack, Ptr  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.kernels.topk import reference as ref, runtime as rt  # noqa: E402

K = 2048
DEV = torch.device("cuda", 0)
SHAPES = {(1, 8192): [(4, 256), (8, 128), (8, 256), (8, 512), (16, 128), (16, 256)],
          (64, 8192): [(4, 256), (8, 128), (8, 256), (8, 512), (16, 128)],
          (132, 8192): [(8, 256), (16, 128)],
          (1, 16384): [(8, 256), (16, 256), (16, 128)],
          (8, 131072): [(16, 1024), (16, 512), (8, 1024)],
          (64, 131072): [(16, 1024), (8, 1024)]}
BUDGETS = [8192, 49152]


def regs(L, S, T):
    sl = (-(-L // S) + 3) & ~3
    return -(-sl // (4 * T))


def handle(S, T, budget, R):
    base = tk.build(budget, T, 12, DEV)
    return rt._cluster_handle(base, S, budget, T, 12, DEV, R)


def runner(h, S, T, x, out, bins, lens):
    B, L = x.shape
    dummy = torch.zeros(1, dtype=torch.int32, device=DEV)
    lp = lens if lens is not None else dummy
    pack = ArgPack([Ptr(0), x.stride(0), L, Ptr(1), int(lens is not None), Ptr(4), 0, K, Ptr(2), 0, Ptr(4), 0, 0,
                    Ptr(3), 0, 0, Ptr(4)])
    ts = (x, lp, out, bins, dummy)
    pack.bind(tuple(t.data_ptr() for t in ts))

    def call():
        rtc.launch_packed(h, B * S, T, h.dynamic_smem, pack, torch.cuda.current_stream().cuda_stream, ts)
    return call


def _try(j):
    try:
        return handle(*j)
    except Exception as e:       # noqa: BLE001
        return f"{type(e).__name__}: {e}"


def main(shapes=SHAPES, budgets=BUDGETS):
    jobs = sorted({(S, T, b, regs(L, S, T)) for (B, L), cs in shapes.items() for S, T in cs for b in budgets})
    with ThreadPoolExecutor(16) as pool:
        built = dict(zip(jobs, pool.map(_try, jobs)))
    print("B,L,S,threads,budget,R,ok,median_us,iqr_us,p90_us,why", flush=True)
    for (B, L), cs in shapes.items():
        x = torch.randn(B, L, device=DEV)
        out = torch.empty(B, K, dtype=torch.int32, device=DEV)
        med, iqr, p90 = kernel_time(lambda: tk.topk(x, K, out=out), 40)
        print(f"{B},{L},default,,,,True,{med:.2f},{iqr:.2f},{p90:.2f},{tk.plan_for(x, K).nresident}", flush=True)
        for S, T in cs:
            for budget in budgets:
                R = regs(L, S, T)
                h = built[(S, T, budget, R)]
                if isinstance(h, str):
                    print(f"{B},{L},{S},{T},{budget},{R},build,,,,{h[:200]}", flush=True)
                    continue
                ok, why = True, ""
                try:
                    for case, s, lens in ref.adversarial_cases(B, L, K):
                        xs = torch.from_numpy(s).to(DEV)
                        ln = torch.from_numpy(lens).to(DEV)
                        o = torch.full((B, K), -7, dtype=torch.int32, device=DEV)
                        bins = torch.zeros(B, 2, dtype=torch.int32, device=DEV)
                        runner(h, S, T, xs, o, bins, ln)()
                        good, why = ref.check_topk(s, lens, K, o.cpu().numpy())
                        if not good:
                            ok, why = False, f"{case}: {why}"
                            break
                    bins = torch.zeros(B, 2, dtype=torch.int32, device=DEV)
                    call = runner(h, S, T, x, out, bins, None)
                    call()
                    good, w2 = ref.check_topk(x.cpu().numpy(), None, K, out.cpu().numpy())
                    ok, why = (ok and good), (why or w2)
                    med, iqr, p90 = kernel_time(call, 40)
                    flags = int(bins[:, 1].max())
                    print(f"{B},{L},{S},{T},{budget},{R},{ok},{med:.2f},{iqr:.2f},{p90:.2f},{why[:200]}"
                          f"{' flags=%d' % flags if flags else ''}", flush=True)
                except Exception as e:     # noqa: BLE001
                    print(f"{B},{L},{S},{T},{budget},{R},error,,,,{type(e).__name__}: {str(e)[:200]}", flush=True)


if __name__ == "__main__":
    main()
