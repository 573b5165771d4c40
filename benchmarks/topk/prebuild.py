#!/usr/bin/env python3
"""Compile the top-k kernels a device run will ask for, side by side (NVRTC releases the GIL), so
that the tests and benchmarks after it load them from occtune's binary cache instead of compiling
one at a time (GPU machine; the device scripts under benchmarks/records/ call it first).

    python3 benchmarks/topk/prebuild.py 49152:1024:12:resident,split 32768:512:12:cluster8r
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py
from harness import gpu_missing, refuse  # noqa: E402

EXTRAS = "resident, split, clusterS, clusterSr"


def jobs(spec: str):
    """(kernel name, macros, dynamic LDS) of each build one spec names (a UserError if malformed)."""
    from occtune.errors import UserError
    from occtune.kernels import topk as tk

    parts = spec.split(":")
    budget, threads, bits, *rest = parts + [""] * (3 - len(parts))
    if len(rest) > 1 or not (budget.isdigit() and threads.isdigit() and bits.isdigit()):
        raise UserError(f"{spec!r} is not BUDGET:THREADS:BITS[:extra,...]; e.g. 49152:1024:12:resident,split")
    budget, threads, bits = int(budget), int(threads), int(bits)
    d = tk.defines(budget, threads, bits)
    out = [(tk.KERNEL_NAME, d, budget)]
    for extra in (rest[0].split(",") if rest else []):
        if extra == "resident":
            out.append((tk.RESIDENT_KERNEL_NAME, {**d, "TOPK_RESIDENT": 1}, budget))
        elif extra == "split":
            out.append((tk.SPLIT_KERNEL_NAME, {**d, "TOPK_SPLIT_ONLY": 1}, 0))
        elif extra.startswith("cluster") and extra[7:].rstrip("r").isdigit():
            S = int(extra[7:].rstrip("r"))
            regs = {"TOPK_CLUSTER_REGS": 4096 // threads} if extra.endswith("r") else {}
            out.append((tk.CLUSTER_KERNEL_NAME, {**d, "TOPK_CLUSTER": S, **regs}, budget))
        else:
            raise UserError(f"{spec!r}: unknown build {extra!r}; known: {EXTRAS}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="compile top-k kernels side by side into occtune's cache")
    ap.add_argument("specs", nargs="*", metavar="BUDGET:THREADS:BITS[:extra,...]",
                    help=f"one config; extra names derived builds: {EXTRAS} (the register path at "
                         "4096/threads float4)")
    a = ap.parse_args(argv)
    from occtune.build import rtc
    from occtune.errors import UserError
    from occtune.kernels import topk as tk

    try:
        todo = [j for spec in a.specs for j in jobs(spec)]
    except UserError as e:
        return refuse(e)
    import torch

    if gpu_missing(torch):
        return 2
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
    sys.exit(main())
