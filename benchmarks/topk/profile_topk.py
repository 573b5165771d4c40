#!/usr/bin/env python3
"""Where the time of one top-k call goes, phase by phase (GPU only; a diagnostic, not a benchmark).

    python3 benchmarks/topk/profile_topk.py --shapes 64x131072,256x131072 --split auto,1

Per shape and config: the call's median time (CUDA events, L2 flushed, as bench_topk.py), and
from a profiling build (-DTOPK_PROF=1: thread 0 of each block reads the SM's cycle counter after
the barrier that ends each phase) the median over rows of each phase's duration in microseconds,
converted with the clock rate measured here (a timed GPU spin of known cycles). Phases: sample
(strided sample -> f0), keep (main pass over the row), thresh (histogram of the kept list or the
row + threshold bin), collect (bin t to the candidate list, bins above to the output), p1-p4 (the
four radix passes), emit, and the whole transform kernel. With a split (S > 1) the main pass runs
in topk_split_keep_kernel first: its time is the call's minus the transform kernel's.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import check_csv, gpu_missing, kernel_time, parse_shapes, refuse, write_csv  # noqa: E402

from bench_topk import _path  # noqa: E402  (beside this file: the bench's path label, from a call's diagnostics too)

PHASES = [("sample", 0, 1), ("keep", 1, 2), ("thresh", None, 3), ("collect", 3, 4),
          ("p1", 4, 5), ("p2", 5, 6), ("p3", 6, 7), ("p4", 7, 8), ("emit", 8, 9), ("kernel", 0, 9)]
# The resident kernel's stamps (topk_resident.cuh; a spread row's are those of the block that
# finished it): load (the slice into LDS, its histogram), merge (the row's two-level histogram
# merge and its two barriers: spread rows only), thresh, collect (bins above t out, bin t to the
# list), finish (the last arrival, then the list's rank or refine), kernel.
RESIDENT_PHASES = [("load", 0, 1), ("merge", 1, 2), ("thresh", None, 3), ("collect", 3, 4), ("finish", 4, 9),
                   ("kernel", 0, 9)]
# Rows a cluster finishes with topk_cluster_narrow (topk_cluster.cuh: the register path's bin t
# larger than block 0's stage, or a kept list that overflowed, its slices read again): read (the
# register path's load and count, or the sample), barrier (the keep pass, where there is one, and
# the first cluster barrier), thresh, then the narrowing's first digit pass, its digit searches,
# the emission and the last barrier; finish, all of it from the threshold on. Block 0's list
# finish, where it runs, writes its own stamps 5-8 over the middle three. Rows whose counted
# values are one key (topk_cluster_one_key) write no stamp between 3 and 9: finish only.
NARROW_PHASES = [("read", 0, 1), ("barrier", 1, 2), ("thresh", None, 3), ("pass1", 3, 4), ("digits", 4, 5),
                 ("emit", 5, 6), ("wait", 6, 7), ("finish", 3, 9), ("kernel", 0, 9)]


def phases_of(diag: dict) -> list:
    """The phases a call's stamps mean, from its diagnostics: the resident kernel's, the cluster
    narrowing's (rows the register path narrowed, or whose lists overflowed), or the others'."""
    if diag["resident"]:
        return RESIDENT_PHASES
    if diag["cluster"] and (diag["row_pass_rows"] or (diag["cluster_regs"] and diag["bin_overflow_rows"])):
        return NARROW_PHASES
    return PHASES


def clock_ghz(torch) -> float:
    cycles = 20_000_000
    torch.cuda._sleep(1000)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    torch.cuda._sleep(cycles)
    e.record()
    torch.cuda.synchronize()
    return cycles / (s.elapsed_time(e) * 1e6)


def phase_cycles(r, a, b):
    """Cycles of one row's phase from stamp a to stamp b (a None: the threshold, from the last
    stamp reached before it); None if b (or a) was not reached."""
    if b is None or r[b] < 0:
        return None
    if a is None:
        return r[b] - max((r[i] for i in (0, 1, 2) if r[i] >= 0), default=0)
    return r[b] - r[a] if r[a] >= 0 else None


def stamped(rows):
    """``rows`` with every row that no profiled block wrote replaced by "not reached" (-1s), in
    place (row numbers keep their meaning). A written row has stamp 0 = 0 (cycles since itself)
    and, where it holds a timeline, one that ends after it starts and spans under a second; a
    block that returns before TOPK_PROF_DUMP (the cluster kernel's replay by block 0) leaves its
    row's top-k indices there, which must not be read as cycles."""
    def ok(r):
        if not r or r[0] != 0:
            return False
        if len(r) < 15:
            return True
        start, end = _timer(r)
        return 0 <= end - start < 10**9
    return [r if ok(r) else [-1] * len(r) for r in rows]


def _timer(r) -> tuple[int, int]:
    """A row's block start and end on the global timer (ns): outputs 10-13, low and high words."""
    return (r[11] & 0xFFFFFFFF) << 32 | (r[10] & 0xFFFFFFFF), (r[13] & 0xFFFFFFFF) << 32 | (r[12] & 0xFFFFFFFF)


def timeline(stamps):
    """(row, start ns, end ns, SM) on the global timer of every row's block that wrote it."""
    return [(i, *_timer(r), r[14]) for i, r in enumerate(stamps) if len(r) >= 15 and r[9] >= 0]


def phase_table(stamps, ghz, phases=PHASES):
    """stamps: [rows, 10] cycles since stamp 0 (-1 = not reached) -> {phase: median us}."""
    res = {}
    for name, a, b in phases:
        vals = [c for c in (phase_cycles(r, a, b) for r in stamps) if c is not None]
        res[name] = statistics.median(vals) / (ghz * 1e3) if vals else float("nan")
    totals = [r[9] for r in stamps if r[9] >= 0]
    res["kernel_max"] = max(totals) / (ghz * 1e3) if totals else float("nan")
    # timeline (global timer, ns) of the blocks that wrote it: start spread, launch span, per SM
    tl = timeline(stamps)
    if tl:
        t0 = min(s for _, s, _, _ in tl)
        res["start_spread"] = (max(s for _, s, _, _ in tl) - t0) / 1e3
        res["span"] = (max(e for _, _, e, _ in tl) - t0) / 1e3
        res["end_spread"] = (max(e for _, _, e, _ in tl) - min(e for _, _, e, _ in tl)) / 1e3
        per_sm = {}
        for *_, sm in tl:
            per_sm[sm] = per_sm.get(sm, 0) + 1
        res["sms"] = len(per_sm)
        res["max_per_sm"] = max(per_sm.values())
    return res


def block_rows(stamps, ghz, config: dict, phases=PHASES) -> list:
    """One dict per profiled block (row) that wrote its timeline: ``config``, its row, SM, start
    and end on the global timer (ns from the call's first start), and its phases (us, -1: not
    reached)."""
    tl = timeline(stamps)
    t0 = min((s for _, s, _, _ in tl), default=0)
    rows = []
    for i, start, end, sm in tl:
        cyc = {name: phase_cycles(stamps[i], a, b) for name, a, b in phases}
        rows.append({**config, "row": i, "sm": sm, "start": start - t0, "end": end - t0,
                     **{f"{n}_us": -1 if c is None else round(c / (ghz * 1e3), 3) for n, c in cyc.items()}})
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="top-k phase profile (GPU)")
    ap.add_argument("--shapes", default="1x8192,64x131072,256x131072,256x1048576")
    ap.add_argument("--budget", default="32K")
    ap.add_argument("--bits", default="12")
    ap.add_argument("--threads", default="512")
    ap.add_argument("--split", default="auto,1", help="blocks per row: auto, or numbers")
    ap.add_argument("--cluster", default="auto",
                    help="cluster kernel (sm_90+): auto, on, off, or a list (auto,off); with a cluster "
                         "the stamps are block 0's, whose thresh/collect include the cluster barriers")
    ap.add_argument("--resident", default="auto",
                    help="the resident kernel: auto, on, off, or a list (auto,off); its phases are load, merge, "
                         "thresh, collect, finish")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--dist", default="random_normal",
                    help="input rows: random_normal or a family of occtune.kernels.topk.reference.CASES "
                         "(e.g. all_equal: where an overflowed row's time goes)")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--blocks-csv", default="",
                    help="also write every profiled block's SM, start and end (global timer, ns from "
                         "the first start) and phase times (us) of the code-warm run to this CSV")
    ap.add_argument("--define", action="append", default=[],
                    help="extra compile macro NAME=VALUE for both kernels (repeatable), e.g. TOPK_KEEP_UNROLL=4")
    a = ap.parse_args(argv)
    from occtune.errors import UserError

    try:
        o = parse_options(a)
    except UserError as e:
        return refuse(e)
    import torch

    from occtune.kernels import topk as tk
    from occtune.build import rtc

    if gpu_missing(torch):
        return 2
    budget, extra = o["budget"], o["extra"]
    ghz = clock_ghz(torch)
    print(f"# {torch.cuda.get_device_name()} clock {ghz:.3f} GHz (timed spin); budget {a.budget}"
          f"{' ' + str(extra) if extra else ''}")
    tiny = torch.zeros(1, device="cuda")
    base, *_ = kernel_time(tiny.zero_, a.reps)
    print(f"# harness: a one-element fill times {base:.1f} us the same way (launch and event overhead)")
    blocks = []
    print(f"# rows: {a.dist}")
    print(f"{'B':>4} {'L':>8} {'thr':>4} {'bits':>4} {'path':>6} {'call us':>8}  phases (us, median over rows)",
          flush=True)
    for B, L in o["shapes"]:
        x = scores(torch, a.dist, B, L, a.k)
        for threads in o["threads"]:
            for bits in o["bits"]:
                d = {**tk.defines(budget, threads, bits), **extra}
                kern = rtc.compile_kernel(tk.read_source(), tk.KERNEL_NAME, d, None,
                                          dynamic_smem=budget)
                kprof = rtc.compile_kernel(tk.read_source(), tk.KERNEL_NAME, {**d, "TOPK_PROF": 1},
                                           None, dynamic_smem=budget)
                for sp, cm, rm in itertools.product(o["split"], o["cluster"], o["resident"]):
                    opts = {"split": sp, "cluster": cm, "resident": rm}
                    out, diag = tk.topk(x, a.k, kernel=kern, return_diagnostics=True, **opts)
                    med, *_ = kernel_time(lambda: tk.topk(x, a.k, kernel=kern, **opts), a.reps)
                    phases = phases_of(diag)
                    cols = [p[0] for p in phases] + ["kernel_max"]
                    raw = tk.topk(x, a.k, kernel=kprof, **opts)[:, :15].cpu().tolist()
                    st = stamped(raw)
                    if not any(r and r[0] == 0 for r in st):
                        print(f"{B:4d} {L:8d} {threads:4d} {bits:4d} {_path(diag):>6} {med:8.1f}  no stamps: no block "
                              "of this path wrote the profile (the cluster kernel's replay by block 0 does not)",
                              flush=True)
                        continue
                    ph = phase_table(st, ghz, phases)
                    # again at once: the profiling build's code is now in the L2 and the SMs'
                    # instruction caches (the first call above ran it cold)
                    st2 = stamped(tk.topk(x, a.k, kernel=kprof, **opts)[:, :15].cpu().tolist())
                    ph2 = phase_table(st2, ghz, phases)
                    print(f"{B:4d} {L:8d} {threads:4d} {bits:4d} {_path(diag):>6} {med:8.1f}  "
                          + " ".join(f"{c} {ph[c]:.2f}" for c in cols), flush=True)
                    print(f"{'(same, code warm)':>38}  " + " ".join(f"{c} {ph2[c]:.2f}" for c in cols), flush=True)
                    blocks += block_rows(st2, ghz, {"B": B, "L": L, "threads": threads, "bits": bits,
                                                    "split": diag["split"], "cluster": diag["cluster"],
                                                    "resident": diag["resident"]}, phases)
                    if "span" in ph:
                        print(f"     timeline (global timer): block starts spread {ph['start_spread']:.2f} us, "
                              f"first start to last end {ph['span']:.2f} us, ends spread {ph['end_spread']:.2f} "
                              f"us; {ph['sms']} SMs, at most {ph['max_per_sm']} blocks on one", flush=True)
        del x
        torch.cuda.empty_cache()
    if a.blocks_csv and not blocks:
        print(f"{a.blocks_csv}: not written (no profiled block wrote its timeline)")
    if a.blocks_csv and blocks:
        try:
            print(write_csv(a.blocks_csv, blocks, BLOCK_KEY))
        except UserError as e:
            return refuse(e)
    return 0


def scores(torch, dist: str, B: int, L: int, k: int):
    """[B, L] float32 rows on the GPU: N(0, 1), or the reference's adversarial family ``dist``."""
    if dist == "random_normal":
        return torch.randn(B, L, device="cuda", generator=torch.Generator(device="cuda").manual_seed(B + L))
    from occtune.kernels.topk import reference as ref

    s_np, _ = ref.make_case(dist, B, L, k, seed=1)
    return torch.from_numpy(s_np).cuda()


# a row of --blocks-csv: one profiled block (row) of one config and path
BLOCK_KEY = ("B", "L", "threads", "bits", "split", "cluster", "resident", "row")
CHOICES = {"--cluster": {"auto": None, "on": True, "off": False}, "--resident": {"auto": None, "on": True, "off": False}}


def parse_options(a) -> dict:
    """The list options, read before anything needs a GPU (a UserError names a bad one)."""
    from occtune.errors import UserError
    from occtune.units import parse_int_list, parse_size

    if a.k < 15:
        raise UserError("--k must be at least 15 (the profiling build writes 15 stamps into each row's "
                        "output); pass --k 15 or more")
    bad = [d for d in a.define if not d.partition("=")[0] or not d.partition("=")[1]]
    if bad:
        raise UserError(f"--define {bad[0]!r} is not NAME=VALUE")
    if a.blocks_csv:
        check_csv(a.blocks_csv, BLOCK_KEY)
    from occtune.kernels.topk.reference import CASES

    if a.dist not in CASES:
        raise UserError(f"--dist {a.dist!r} is not one of {', '.join(CASES)}")
    out = {"shapes": parse_shapes(a.shapes), "budget": parse_size(a.budget, "--budget"),
           "threads": parse_int_list(a.threads, "--threads"), "bits": parse_int_list(a.bits, "--bits"),
           "extra": dict(d.split("=", 1) for d in a.define), "split": [_split(s) for s in a.split.split(",")]}
    for opt, text in (("--cluster", a.cluster), ("--resident", a.resident)):
        words = [w.strip() for w in text.split(",")]
        wrong = [w for w in words if w not in CHOICES[opt]]
        if wrong:
            raise UserError(f"{opt}: {wrong[0]!r} is not one of {', '.join(CHOICES[opt])}")
        out[opt.strip("-")] = [CHOICES[opt][w] for w in words]
    return out


def _split(text: str):
    from occtune.errors import UserError

    if text.strip() == "auto":
        return None
    if not text.strip().isdigit():
        raise UserError(f"--split: {text!r} is not auto or a number of blocks per row")
    return int(text)


if __name__ == "__main__":
    sys.exit(main())
