#!/usr/bin/env python3
"""Device call 12 of issue 32 (H200): a GEMV-shaped decode kernel for M <= 8, no split-K.

One program per BLOCK_N weight rows walks all of K, BLOCK_K bytes of each row at a time, the next
chunk's loads issued before this one's arithmetic (a register double buffer); fp8 -> fp32 on the
CUDA cores, the 128-wide groups summed, scaled by the weight block's and the token's scales, added
in K order. No partials, no tickets, no second pass: the question is whether the split kernel's
reduction tail (PIPE 9/10: partials written, a ticket, a read-back) is what keeps M = 1-8 above
the read-once probe. Timed beside PIPE 10's default (``fp8_gemm()`` without a config), cuBLASLt (M
padded as vLLM does) and the probe, one call captured in a CUDA graph, L2 flushed (engine timer);
every variant is verified against the float64 reference first.

    python3 benchmarks/records/fp8_decode/explore_gemv.py --out $OUT/gemv.json           # GPU
    TRITON_INTERPRET=1 python3 benchmarks/records/fp8_decode/explore_gemv.py --check     # CPU
"""
from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

import triton
import triton.language as tl

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "benchmarks"))

SHAPES = [(2112, 7168), (4096, 7168), (4608, 7168), (7168, 2048), (7168, 2304), (7168, 16384), (16384, 1536),
          (8192, 32768), (32768, 8192), (512, 7168), (1024, 8192), (3072, 1536), (7168, 256), (8192, 1024)]
MS = (1, 4, 8)
VARIANTS = list(itertools.product((4, 8, 16), (512, 1024), (4, 8), (1,)))   # BLOCK_N, BLOCK_K, warps, stages


@triton.jit
def gemv_kernel(a_ptr, as_ptr, b_ptr, bs_ptr, c_ptr, M, N, K, stride_am, stride_asm, stride_ask, stride_bn,
                stride_bsn, stride_bsk, stride_cm, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                BLOCK_M: tl.constexpr):
    pid = tl.program_id(0)
    rn = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    rnc = tl.minimum(rn, N - 1).to(tl.int64)          # rows past N read row N - 1 (not stored)
    rk = tl.arange(0, BLOCK_K)
    KB: tl.constexpr = BLOCK_K // 128
    rkb = tl.arange(0, KB)
    nkb = (K + 127) // 128
    rm = tl.arange(0, BLOCK_M)
    w_ptrs = b_ptr + rnc[:, None] * stride_bn + rk[None, :]
    ws_ptrs = bs_ptr + (rnc // 128)[:, None] * stride_bsn
    acc = tl.zeros([BLOCK_N, BLOCK_M], tl.float32)
    w = tl.load(w_ptrs, mask=rk[None, :] < K, other=0.0)
    for k0 in range(0, K, BLOCK_K):
        kn = k0 + BLOCK_K
        w_next = tl.load(w_ptrs + kn, mask=(kn + rk)[None, :] < K, other=0.0)     # in flight meanwhile
        kk = k0 + rk
        kb = k0 // 128 + rkb
        ws = tl.load(ws_ptrs + kb[None, :] * stride_bsk, mask=kb[None, :] < nkb, other=0.0)    # [BN, KB]
        wf = w.to(tl.float32)
        for m in tl.static_range(BLOCK_M):
            mc = tl.minimum(m, M - 1)
            x = tl.load(a_ptr + mc * stride_am + kk, mask=kk < K, other=0.0).to(tl.float32)    # [BK]
            xs = tl.load(as_ptr + mc * stride_asm + kb * stride_ask, mask=kb < nkb, other=0.0)   # [KB]
            grp = tl.sum(tl.reshape(wf * x[None, :], [BLOCK_N, KB, 128]), axis=2)              # [BN, KB]
            col = tl.sum(grp * ws * xs[None, :], axis=1)                                       # [BN]
            acc += tl.where(rm[None, :] == m, col[:, None], 0.0)
        w = w_next
    c = c_ptr + rm[None, :].to(tl.int64) * stride_cm + rn[:, None]
    tl.store(c, acc.to(tl.bfloat16), mask=(rn[:, None] < N) & (rm[None, :] < M))


def gemv(a, a_s, b, b_s, out, bn: int, bk: int, warps: int, stages: int):
    M, K = a.shape
    N = b.shape[0]
    bm = 1 << (M - 1).bit_length()
    gemv_kernel[(triton.cdiv(N, bn),)](a, a_s, b, b_s, out, M, N, K, a.stride(0), a_s.stride(0), a_s.stride(1),
                                        b.stride(0), b_s.stride(0), b_s.stride(1), out.stride(0), BLOCK_N=bn,
                                        BLOCK_K=bk, BLOCK_M=bm, num_warps=warps, num_stages=stages)
    return out


def check():
    """CPU (TRITON_INTERPRET=1): odd shapes against the float64 reference."""
    from occtune.kernels.fp8_gemm.family import make_gemm_inputs, verify

    for (M, N, K), (bn, bk) in itertools.product([(1, 200, 320), (3, 130, 1000), (8, 256, 2048)], [(4, 512), (16, 1024)]):
        inp = make_gemm_inputs(M, N, K, 7, "cpu")
        inp.out.fill_(float("nan"))
        r = verify(gemv(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, bn, bk, 4, 1), inp)
        print(M, N, K, bn, bk, r.ok, r.reason if not r.ok else "")
        assert r.ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--rep-ms", type=float, default=4.0)
    a = ap.parse_args()
    if a.check:
        return check()
    import torch

    from harness import graph_of
    from read_probe import probes
    from occtune.engine.bench import BenchTimer
    from occtune.kernels.fp8_gemm import fp8_gemm
    from occtune.kernels.fp8_gemm.config import library_config
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, verify

    t0 = time.time()
    timer = BenchTimer(warmup_ms=1.0, rep_ms=a.rep_ms)
    fam = Fp8GemmFamily([{"M": 1, "N": 512, "K": 7168}], target="sm_90", backends=["triton", "torch_scaled_mm"])
    lib = fam.build(library_config("torch_scaled_mm", "sm_90"), "cuda")
    res = []

    def gtime(fn):
        g = graph_of(torch, fn)
        t = timer(g.replay, context={"device": "cuda"})
        del g
        return round(t.median_us, 3)

    for (n, k) in SHAPES:
        x = torch.randn(n, k // 4, device="cuda")
        probe = min(gtime(call) for name, call, chk in probes(x) if chk())
        del x
        for M in MS:
            inp = fam.make_inputs({"M": M, "N": n, "K": k}, 1, "cuda")
            exp = expected_rows(inp)
            own = torch.empty_like(inp.out)
            rec = {"n": n, "k": k, "M": M, "probe_us": probe, "lib_us": gtime(lambda: lib.call(inp)),
                   "default_us": gtime(lambda: fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, out=own)), "var": []}
            for bn, bk, w, st in VARIANTS:
                if bk > 128 * -(-k // 128) * 2:
                    continue
                try:
                    inp.out.fill_(float("nan"))
                    gemv(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, bn, bk, w, st)
                    ok = verify(inp.out, inp, exp)
                    if not ok.ok:
                        rec["var"].append([bn, bk, w, st, None, ok.reason[:80]])
                        continue
                    us = gtime(lambda: gemv(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, bn, bk, w, st))
                    rec["var"].append([bn, bk, w, st, us, ""])
                except Exception as e:  # noqa: BLE001
                    rec["var"].append([bn, bk, w, st, None, f"{type(e).__name__}: {str(e)[:80]}"])
            ok = [v for v in rec["var"] if v[4]]
            best = min(ok, key=lambda v: v[4]) if ok else None
            res.append(rec)
            b = best[4] if best else float("nan")
            print(f"{n:>5},{k:<5} M={M:<2} probe {probe:6.2f} lib {rec['lib_us']:6.2f} default {rec['default_us']:6.2f} "
                  f"gemv {b:6.2f} {best[:4] if best else '-'}: x{rec['default_us'] / b:4.2f} default, "
                  f"x{rec['lib_us'] / b:4.2f} lib, {b / probe:4.2f} probe; bad {len(rec['var']) - len(ok)} "
                  f"({time.time() - t0:.0f} s)", flush=True)
            Path(a.out).write_text(json.dumps(res))
    print(f"done {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
