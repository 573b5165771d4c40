"""H200: what an empty kernel costs on the engine's timer (L2 flushed, events, GPU spin), by
launch shape: where the top-k call's time outside its blocks' span (call minus first-start-to-
last-end, beyond the one-element fill's) could come from. Each kernel writes one int from block 0
(cupy RawKernel on torch's current stream). Run: PYTHONPATH=<occtune wheel> python3 launch_probe.py"""
import cupy as cp
import torch

from occtune.engine.bench import measure

SRC = r"""
extern "C" __global__ void empty(int* o) { extern __shared__ int s[]; if (blockIdx.x == 0 && threadIdx.x == 0) o[0] = 1; }
extern "C" __global__ void __cluster_dims__(2, 1, 1) empty_c2(int* o) { extern __shared__ int s[]; if (blockIdx.x == 0 && threadIdx.x == 0) o[0] = 1; }
extern "C" __global__ void __cluster_dims__(8, 1, 1) empty_c8(int* o) { extern __shared__ int s[]; if (blockIdx.x == 0 && threadIdx.x == 0) o[0] = 1; }
"""
mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
o = cp.zeros(1, dtype=cp.int32)
stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
tiny = torch.zeros(1, device="cuda")


def t(fn):
    return measure(fn, reps=30, flush_l2=True).median_us


print(f"one-element fill (torch): {t(tiny.zero_):.2f} us")
for name, grid, block in (("empty", 1, 32), ("empty", 256, 512), ("empty", 128, 1024), ("empty_c2", 128, 1024),
                          ("empty_c8", 64, 512)):
    k = mod.get_function(name)
    for smem in (0, 32768, 100 * 1024):
        k.max_dynamic_shared_size_bytes = smem
        def call():
            with stream:
                k((grid,), (block,), (o,), shared_mem=smem)
        call()
        torch.cuda.synchronize()
        print(f"{name:9s} grid {grid:4d} x {block:4d} threads, {smem // 1024:3d} KiB dynamic smem: {t(call):.2f} us",
              flush=True)
