#!/usr/bin/env python3
"""Device call 13 of issue 32 (H200): does the weight's layout keep M = 1 above the read-once probe?

Call 12 (explore_gemv.py) found a kernel with no split and no tensor core no faster at M = 1 than
PIPE 10's split-K: both sit 1.15-1.6x above the probe, which reads the same bytes contiguously.
Both kernels read each K step of their rows as BLOCK_N separate row segments (128-1024 bytes
each, K bytes apart). Here the GEMV kernel of call 12 reads the same weights packed tile-major
([N / BN, K / BK, BN, BK], each program's chunk one contiguous BN x BK block, as a serving
engine would repack once at load time) against the row-major original, same config, same timer,
verified against the float64 reference; beside PIPE 10's default and the probe.

    python3 benchmarks/records/fp8_decode/explore_layout.py --out $OUT/layout.json           # GPU
    TRITON_INTERPRET=1 python3 benchmarks/records/fp8_decode/explore_layout.py --check       # CPU
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from explore_gemv import ROOT, gemv  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPES = [(2112, 7168), (4096, 7168), (4608, 7168), (7168, 2048), (7168, 2304), (7168, 16384), (16384, 1536),
          (8192, 32768), (32768, 8192), (512, 7168), (1024, 8192), (3072, 1536), (7168, 256), (8192, 1024)]
CONFIGS = ((4, 1024, 4), (8, 512, 4), (8, 1024, 4), (16, 512, 4), (16, 1024, 8))     # BLOCK_N, BLOCK_K, warps


@triton.jit
def gemv_tiled_kernel(a_ptr, as_ptr, p_ptr, bs_ptr, c_ptr, N, K, KP, stride_bsn, stride_bsk,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """M = 1: C[0, n] over all of K from the tile-major weights p ([N/BN, KP/BK, BN, BK])."""
    pid = tl.program_id(0)
    G: tl.constexpr = BLOCK_K // 128
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    rg = tl.arange(0, G)
    groups = (K + 127) // 128
    tile = p_ptr + pid.to(tl.int64) * KP * BLOCK_N + tl.arange(0, BLOCK_N)[:, None] * BLOCK_K + rk[None, :]
    ws_ptrs = bs_ptr + (rn // 128)[:, None] * stride_bsn
    acc = tl.full((BLOCK_N,), 0.0, tl.float32)
    w = tl.load(tile)
    for k0 in range(0, K, BLOCK_K):
        w_next = tl.load(tile + (k0 + BLOCK_K) * BLOCK_N, mask=(k0 + BLOCK_K + rk * 0)[None, :] < K, other=0.0)
        kk = k0 + rk
        kb = k0 // 128 + rg
        ws = tl.load(ws_ptrs + kb[None, :] * stride_bsk, mask=kb[None, :] < groups, other=0.0)
        x = tl.load(a_ptr + kk, mask=kk < K, other=0.0).to(tl.float32)
        xs = tl.load(as_ptr + kb, mask=kb < groups, other=0.0)
        grp = tl.sum(tl.reshape(w.to(tl.float32) * x[None, :], (BLOCK_N, G, 128)), axis=2)
        acc += tl.sum(grp * ws * xs[None, :], axis=1)
        w = w_next
    tl.store(c_ptr + rn, acc.to(tl.bfloat16), mask=rn < N)


def pack(b, bn: int, bk: int):
    """b [N, K] (N % bn == 0) as [N/bn, KP/bk, bn, bk] contiguous, K padded with zeros to KP."""
    import torch

    N, K = b.shape
    kp = -(-K // bk) * bk
    padded = torch.zeros((N, kp), dtype=torch.uint8, device=b.device)
    padded[:, :K] = b.view(torch.uint8)
    return padded.view(N // bn, bn, kp // bk, bk).permute(0, 2, 1, 3).contiguous().view(b.dtype), kp


def tiled(a, a_s, packed, kp, b_s, out, N, K, bn, bk, warps):
    gemv_tiled_kernel[(N // bn,)](a, a_s, packed, b_s, out, N, K, kp, b_s.stride(0), b_s.stride(1),
                                   BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=1)
    return out


def check():
    from occtune.kernels.fp8_gemm.family import make_gemm_inputs, verify

    for (N, K), (bn, bk, w) in zip([(256, 1000), (512, 2048)], [(4, 512, 4), (16, 1024, 4)]):
        inp = make_gemm_inputs(1, N, K, 9, "cpu")
        packed, kp = pack(inp.b, bn, bk)
        inp.out.fill_(float("nan"))
        r = verify(tiled(inp.a, inp.a_s, packed, kp, inp.b_s, inp.out, N, K, bn, bk, w), inp)
        print(N, K, bn, bk, r.ok, r.reason if not r.ok else "")
        assert r.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    if a.check:
        return check()
    import torch

    from harness import graph_of
    from read_probe import probes
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm import fp8_gemm
    from occtune.kernels.fp8_gemm.family import make_gemm_inputs, verify

    t0 = time.time()
    timer = BenchTimer(warmup_ms=1.0, rep_ms=4.0)

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"})
        del g
        return round(t.median_us, 3)

    res = []
    for n, k in SHAPES:
        x = torch.randn(n, k // 4, device="cuda")
        probe = min(gtime(call) for _, call, chk in probes(x) if chk())
        del x
        inp = make_gemm_inputs(1, n, k, 1, "cuda")
        own = torch.empty_like(inp.out)
        rec = {"n": n, "k": k, "probe_us": probe,
               "default_us": gtime(lambda: fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, out=own)), "var": []}
        for bn, bk, w in CONFIGS:
            packed, kp = pack(inp.b, bn, bk)
            row = []
            for name, call in (("rows", lambda: gemv(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, bn, bk, w, 1)),
                               ("tiles", lambda: tiled(inp.a, inp.a_s, packed, kp, inp.b_s, inp.out, n, k, bn, bk, w))):
                inp.out.fill_(float("nan"))
                call()
                ok = verify(inp.out, inp)
                row.append(gtime(call) if ok.ok else None)
            rec["var"].append([bn, bk, w, *row])
            del packed
        res.append(rec)
        best_r = min(v[3] for v in rec["var"] if v[3])
        best_t = min(v[4] for v in rec["var"] if v[4])
        print(f"{n:>5},{k:<5} M=1 probe {probe:6.2f} default {rec['default_us']:6.2f} rows {best_r:6.2f} "
              f"tiles {best_t:6.2f}: tiles/probe {best_t / probe:4.2f}, rows/probe {best_r / probe:4.2f}, "
              f"x{rec['default_us'] / best_t:4.2f} default  {[v for v in rec['var']]} ({time.time() - t0:.0f} s)",
              flush=True)
        Path(a.out).write_text(json.dumps(res))
    print(f"done {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
