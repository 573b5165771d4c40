#!/usr/bin/env python3
"""Throughput of the tie statistics (`tune ties`) on the CPU, in GB/s of float32 scores.

    python3 benchmarks/topk/bench_ties.py                        # 64 x 1M float32 in memory
    python3 benchmarks/topk/bench_ties.py --file --rows 256      # also stream a 256 x 1M .npy file

In memory: best of --repeats runs of ``tie_stats`` (8- and 12-bit keys, K = 2048) on normal
rows, for each fp16 backend (torch, numpy) and thread count. With --file: writes a .npy of the
same shape to --tmp, streams it with ``tie_stats_from_file`` (memory-mapped, row chunks) and
prints the throughput and the process's peak resident memory against the file size, which shows
the file is never held twice (streamed in a child process, so the peak is the streaming's own).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from occtune.kernels.topk import ties


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=64)
    p.add_argument("--length", type=int, default=1 << 20)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", default="1,2", help="thread counts to try, e.g. 1,2,4")
    p.add_argument("--backends", default="torch,numpy", help="fp16 converters to try")
    p.add_argument("--file", action="store_true", help="also stream the scores from a .npy file")
    p.add_argument("--stream", metavar="FILE", help="only stream FILE (used by --file)")
    p.add_argument("--tmp", default=tempfile.gettempdir(), help="folder for the --file test")
    return p.parse_args(argv)


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (VmHWM: unlike ru_maxrss, not inherited over exec)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024   # Linux reports KiB


def bench_memory(x: np.ndarray, backend: str, threads: int, repeats: int) -> float:
    ties.set_fp16_backend(backend)
    ties.tie_stats(x[:1], threads=threads)              # warm-up: imports, LUTs, thread pool
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        ties.tie_stats(x, bits=(8, 12), k=2048, threads=threads)
        best = min(best, time.perf_counter() - t0)
    return x.nbytes / best / 1e9


def stream(path: str) -> None:
    """Child process: stream one file and report throughput and this process's peak RSS."""
    ties.tie_stats(np.zeros((1, 4096), np.float32))       # warm-up: torch import, thread pool
    rss0 = peak_rss_bytes()
    t0 = time.perf_counter()
    st = ties.tie_stats_from_file(path, bits=(8, 12), k=2048)
    dt = time.perf_counter() - t0
    size = Path(path).stat().st_size
    print(f"file {st.rows} x {st.length} {st.dtype} ({size / 2**30:.2f} GiB): "
          f"{size / dt / 1e9:.2f} GB/s ({dt:.2f} s); peak RSS {peak_rss_bytes() / 2**30:.2f} GiB "
          f"(before streaming {rss0 / 2**30:.2f} GiB); max candidates 8-bit "
          f"{st.max_candidates[8]}, 12-bit {st.max_candidates[12]}")


def bench_file(rows: int, length: int, tmp: str) -> None:
    path = Path(tmp) / f"bench_ties_{os.getpid()}.npy"
    try:
        arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(rows, length))
        for r in range(rows):                            # write row by row: never the whole in RAM
            arr[r] = np.random.default_rng(r).standard_normal(length, dtype=np.float32)
        arr.flush()
        del arr
        subprocess.run([sys.executable, __file__, "--stream", str(path)], check=True)
    finally:
        path.unlink(missing_ok=True)


def main(argv=None) -> None:
    args = parse_args(argv)
    if args.stream:
        stream(args.stream)
        return
    if args.file:     # first, so that the peak RSS it reports is its own
        bench_file(args.rows, args.length, args.tmp)
    x = np.random.default_rng(0).standard_normal((args.rows, args.length), dtype=np.float32)
    print(f"{args.rows} x {args.length} float32 = {x.nbytes / 2**20:.0f} MiB in memory, "
          f"{os.cpu_count()} CPUs, numpy {np.__version__}")
    for backend in args.backends.split(","):
        for threads in (int(t) for t in args.threads.split(",")):
            try:
                gbs = bench_memory(x, backend, threads, args.repeats)
            except Exception as e:  # noqa: BLE001 - a missing backend is a row, not a crash
                print(f"  backend {backend:5s} threads {threads}: unavailable ({e})")
                continue
            print(f"  backend {backend:5s} threads {threads}: {gbs:6.2f} GB/s of float32 scores")


if __name__ == "__main__":
    main()
