#!/usr/bin/env python3
"""Compile the top-k kernels a device run will ask for, side by side (NVRTC releases the GIL), so
that the tests and benchmarks after it load them from occtune's binary cache instead of compiling
one at a time. Usage: prebuild.py BUDGET:THREADS:BITS[:extra,...] ... where extra names the derived
builds: resident, split, cluster8, cluster8r (the register path at 8 float4 / 512 threads)."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor


def jobs(spec: str):
    from occtune.kernels import topk as tk

    budget, threads, bits, *rest = spec.split(":")
    budget, threads, bits = int(budget), int(threads), int(bits)
    d = tk.defines(budget, threads, bits)
    out = [(tk.KERNEL_NAME, d, budget)]
    for extra in (rest[0].split(",") if rest else []):
        if extra == "resident":
            out.append((tk.RESIDENT_KERNEL_NAME, {**d, "TOPK_RESIDENT": 1}, budget))
        elif extra == "split":
            out.append((tk.SPLIT_KERNEL_NAME, {**d, "TOPK_SPLIT_ONLY": 1}, 0))
        elif extra.startswith("cluster"):
            S = int(extra[7:].rstrip("r"))
            regs = {"TOPK_CLUSTER_REGS": 4096 // threads} if extra.endswith("r") else {}
            out.append((tk.CLUSTER_KERNEL_NAME, {**d, "TOPK_CLUSTER": S, **regs}, budget))
    return out


def main(argv) -> int:
    from occtune.build import rtc
    from occtune.kernels import topk as tk

    todo = [j for spec in argv for j in jobs(spec)]
    src = tk.read_source()
    t0 = time.time()

    def one(job):
        name, d, smem = job
        try:
            rtc.compile_kernel(src, name, d, None, dynamic_smem=smem)
            return None
        except Exception as e:      # noqa: BLE001  (reported, the run goes on)
            return f"{name} {d}: {e}"
    with ThreadPoolExecutor(16) as pool:
        errors = [e for e in pool.map(one, todo) if e]
    print(f"prebuild: {len(todo)} kernels in {time.time() - t0:.1f} s; {len(errors)} failed")
    for e in errors:
        print("  " + e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
