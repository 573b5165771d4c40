#!/usr/bin/env python3
"""How long one pass over an 8K-value LDS slice takes in one block (issue 33's collect question).

A probe kernel appended to topk.cuh (never shipped) loads N(0,1) scores into LDS as canonical bits,
then times (clock64, thread 0, between barriers) four passes of each variant and prints cycles per
pass: 0 = the coarse bin as the kernel computes it (topk_bin: fp32 -> fp16 conversion) and a count
above / at a threshold bin (the collect's first pass); 1 = the same count on the bits' top bits (no
conversion); 2 = the loads and an add only. One block; TOPK_THREADS 1024 and 512.

    python3 benchmarks/records/topk_small/pass_probe.py
"""
import torch

from occtune.build import rtc
from occtune.kernels import topk as tk

PROBE = r"""
extern "C" __global__ void __launch_bounds__(TOPK_THREADS)
topk_pass_probe(const float* x, int n, int t, int variant, long long* cyc, int* sink) {
  extern __shared__ __attribute__((aligned(16))) unsigned char dyn[];
  topk_u32* s = (topk_u32*)dyn;
  for (int i = threadIdx.x; i < n; i += TOPK_THREADS) s[i] = topk_canon(topk_bits(x[i]));
  __syncthreads();
  unsigned acc = 0u;
  const long long c0 = clock64();
  if (variant == 0) {
    for (int rep = 0; rep < 4; ++rep) {
      for (int i = threadIdx.x; i < n; i += TOPK_THREADS) {
        const int bin = topk_bin(s[i]);
        acc += (bin > t ? 0x10000u : 0u) + (bin == t ? 1u : 0u);
      }
      __syncthreads();
    }
  } else if (variant == 1) {
    for (int rep = 0; rep < 4; ++rep) {
      for (int i = threadIdx.x; i < n; i += TOPK_THREADS) {
        const int bin = (int)(s[i] >> (32 - TOPK_COARSE_BITS));
        acc += (bin > t ? 0x10000u : 0u) + (bin == t ? 1u : 0u);
      }
      __syncthreads();
    }
  } else {
    for (int rep = 0; rep < 4; ++rep) {
      for (int i = threadIdx.x; i < n; i += TOPK_THREADS) acc += s[i];
      __syncthreads();
    }
  }
  const long long c1 = clock64();
  if (threadIdx.x == 0) cyc[0] = c1 - c0;
  if (acc == 0x12345678u) sink[0] = (int)acc;
}
"""


def main():
    n = 8192
    x = torch.randn(n, device="cuda")
    cyc = torch.zeros(1, dtype=torch.int64, device="cuda")
    sink = torch.zeros(1, dtype=torch.int32, device="cuda")
    for threads in (1024, 512):
        d = tk.defines(49152, threads, 12)
        k = rtc.compile_kernel(tk.read_source() + PROBE, "topk_pass_probe", d, None, dynamic_smem=4 * n)
        t = 2500                     # any bin: the compares cost the same
        for variant, what in ((0, "topk_bin (fp16 conversion) + count"), (1, "top bits + count"),
                              (2, "LDS loads + add")):
            best = None
            for _ in range(6):
                rtc.launch(k, (1,), (threads,), [x, n, t, variant, cyc, sink], shared_mem=4 * n)
                torch.cuda.synchronize()
                c = int(cyc.item()) / 4
                best = c if best is None else min(best, c)
            print(f"threads {threads:4d}  {what:36s} {best:8.0f} cycles a pass ({best / 1.96e3:.2f} us at 1.96 GHz)",
                  flush=True)


if __name__ == "__main__":
    main()
