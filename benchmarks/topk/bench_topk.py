#!/usr/bin/env python3
"""Benchmark the radix top-k kernel per LDS budget against torch.topk and the read floor.

    python3 benchmarks/topk/bench_topk.py --shapes 1x8192,64x8192,8x131072,64x131072,256x131072,1x1048576,256x1048576 \
        --budgets 32K,48K --bits 12 --threads 512,1024 --reps 15 --serve-calls 300 --out topk_serve_bench.csv

(the table of results/sm_90/topk_serve_bench.csv; results/README.md says how each committed table was made)

For every budget x coarse-key width x block size x (B, L) (the launcher's default path: on sm_90+
split rows go to the cluster kernel; on long rows also two comparison runs: one block per row,
and the split kernel with its global list), two timings of the same call:
- kernel time (median_us, iqr_us): the engine's timer (harness.kernel_time, a BenchTimer): CUDA
  events around one call, the L2 flushed (a 2x L2 write) before each, then a GPU spin so that the
  host's launch overhead stays outside the events;
- serving loop (serve_us, host_us): ``--serve-calls`` back-to-back calls as a decode step runs
  them (no flush, no spin, no synchronisation): serve_us = GPU time per call of the loop (events
  around it; the L2 is warm, and a call whose host time exceeds its GPU time shows it here),
  host_us = the host's wall time per call of the loop (issue 17's host cost);
and the same two for torch.topk(sorted=False). Also GB/s of the input read, % of the read floor
(floor = B*L*4 bytes / copy bandwidth, measured here with a large device-to-device copy; copy
bandwidth counts bytes read + written) and the read-once probe (read1 us: the fastest kernel
measured that only reads the input once, on the same timer, launch included; read_probe.py).
Every config's output is verified (tie-aware) on a few
rows before it is timed. Writes a CSV with provenance (a row per run, config, input and GPU: a
later run replaces its own rows and keeps the others) and prints a table, a summary of the
issue's targets, a plan check (on each shape, each config's default path against the best
path measured for it: the launcher's plan should never be more than 1.5x off) and an overflow
check (issue 17: every run with an overflowed row, by the kernel's per-row flags, against the
fastest run of the same shape without one; target: within 2x). ``--dist`` takes several input
families (e.g. random_normal,one_bin_77,all_equal): the overflow check compares across them.

    python3 benchmarks/topk/bench_topk.py --shapes 64x1048576 --budgets 32K,40K,48K --bits 8,12 \
        --threads 512 --no-split-compare --dist random_normal,one_bin_77
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import (check_csv, copy_bandwidth, gpu_missing, kernel_time, parse_shapes,  # noqa: E402
                     provenance, refuse, serving_loop, write_csv)

SHAPES = [(1, 8192), (8, 8192), (64, 8192), (256, 8192), (1, 65536), (8, 65536), (64, 65536),
          (256, 65536), (1, 131072), (8, 131072), (64, 131072), (256, 131072), (1, 1 << 20),
          (8, 1 << 20), (64, 1 << 20), (256, 1 << 20)]
TIMER = "occtune.engine.bench.BenchTimer (L2 flushed, launch hidden); serving loop: back-to-back calls"
# a row of the CSV is one run of one config on one input of one GPU: a later run replaces it
KEY = ("device", "B", "L", "K", "dist", "budget", "bits", "threads", "split", "cluster", "cluster_regs",
       "resident", "run")


def parse_lists(a) -> dict:
    """The comma-separated options as lists, each config checked by the kernel's own rules (a
    UserError names the option and the bad item)."""
    from occtune.errors import UserError
    from occtune.kernels import topk as tk
    from occtune.units import parse_int_list, parse_size_list

    out = {"shapes": parse_shapes(a.shapes) if a.shapes else SHAPES,
           "budgets": parse_size_list(a.budgets, "--budgets"),
           "bits": parse_int_list(a.bits, "--bits"), "threads": parse_int_list(a.threads, "--threads"),
           "splits": parse_int_list(a.splits, "--splits") if a.splits.strip() else [],
           "clusters": parse_int_list(a.clusters, "--clusters") if a.clusters.strip() else []}
    for b in out["budgets"]:
        for t in out["threads"]:
            for nb in out["bits"]:
                tk.defines(b, t, nb)                      # the kernel's rules, as the CLI checks them
    bad = [c for c in out["clusters"] if not 2 <= c <= tk.MAX_CLUSTER]
    if bad:
        raise UserError(f"--clusters: {bad[0]} is not a cluster size; write sizes from 2 to {tk.MAX_CLUSTER}")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="radix top-k benchmark")
    ap.add_argument("--out", default="topk_bench.csv",
                    help="CSV to write, or to add this run's rows to (harness.write_csv; default: ./topk_bench.csv)")
    ap.add_argument("--budgets", default="32K,48K")
    ap.add_argument("--bits", default="8,12", help="coarse key widths to sweep (8, 12)")
    ap.add_argument("--threads", default="512,1024", help="block sizes to sweep")
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--shapes", default="", help="e.g. 64x131072,256x1048576 (default: 4x4 grid)")
    ap.add_argument("--no-split-compare", dest="split_compare", action="store_false",
                    help="skip the comparison runs on long rows: one block per row (split off) and, "
                         "where the launcher picks the cluster kernel, the split kernel instead")
    ap.add_argument("--compare-all", action="store_true",
                    help="the comparison runs for every config (default: the first 12-bit config only)")
    ap.add_argument("--splits", default="",
                    help="comparison runs that force these blocks per row with the split kernel on long rows "
                         "(e.g. 8,16,32,64: what the plan's choice is checked against)")
    ap.add_argument("--clusters", default="",
                    help="comparison runs that force these cluster sizes on long rows (sm_90+; e.g. 8,12,16: "
                         "cluster=True, split=S)")
    ap.add_argument("--dist", default="random_normal",
                    help="input families, comma-separated (occtune.kernels.topk.reference)")
    ap.add_argument("--default", action="store_true",
                    help="also time topk(x, k) with no config: the committed per-workload tuned config")
    ap.add_argument("--serve-calls", type=int, default=1000,
                    help="back-to-back calls of the serving-loop timing (host_us, serve_us)")
    a = ap.parse_args(argv)
    from occtune.errors import UserError

    try:
        lists = parse_lists(a)
        check_csv(a.out, KEY)
    except UserError as e:
        return refuse(e)

    import torch

    from occtune.kernels import topk as tk
    from occtune.kernels.topk import reference as ref
    from read_probe import read_once_us

    if gpu_missing(torch):
        return 2
    shapes, budgets = lists["shapes"], lists["budgets"]
    prov = provenance(TIMER)
    bw = copy_bandwidth(torch)
    print(f"# {prov['device']} {prov['arch']} torch {prov['torch']}: copy bandwidth "
          f"{bw / 1e12:.2f} TB/s (read+write); kernel time: engine timer (L2 flushed); serving loop: "
          f"{a.serve_calls} back-to-back calls", flush=True)
    configs = [(b, nb, nt) for nt in lists["threads"] for nb in lists["bits"] for b in budgets]
    kernels = {c: tk.build(c[0], c[2], c[1]) for c in configs}
    # comparison runs for the first 12-bit config, on long rows only
    base = next((c for c in configs if c[1] == 12), configs[0])
    rows, probe = [], {}
    gen = torch.Generator(device="cuda")
    for (B, L), dist in ((shape, d) for shape in shapes for d in a.dist.split(",") if d.strip()):
        gen.manual_seed(B * 7 + L)
        if dist == "random_normal":
            x = torch.randn(B, L, device="cuda", generator=gen)
        else:
            s_np, _ = ref.make_case(dist, B, L, a.k, seed=1)
            x = torch.from_numpy(s_np).cuda()
        floor_us = B * L * 4 / bw * 1e6
        if (B, L) not in probe:
            probe[(B, L)] = read_once_us(x, a.reps)
            print(f"({B}, {L}): read-once probe {probe[(B, L)][0]:.1f} us ({probe[(B, L)][1]})", flush=True)
        probe_us = probe[(B, L)][0]
        ref_fn = lambda: torch.topk(x, a.k, dim=-1, sorted=False)        # noqa: E731
        t_ref, iqr_ref, _ = kernel_time(ref_fn, a.reps)
        ref_host, ref_serve = serving_loop(torch, ref_fn, a.serve_calls)
        nchk = min(B, 4)
        runs = [(c, {}, "plan") for c in configs]
        for c in configs if a.compare_all else [base]:
            if a.split_compare:
                runs.append((c, {"resident": False}, "not resident"))   # the plan's path without the resident kernel
            if tk.long_row_plan(L, a.k)[1] and a.split_compare:
                runs.append((c, {"split": 0, "resident": False}, "one block"))          # one block per row
                runs.append((c, {"cluster": False, "resident": False}, "split kernel"))  # never clusters
                runs.append((c, {"resident": False}, "sampled cluster"))  # the plan without the register path
                runs += [(c, {"split": v, "cluster": False}, "forced split") for v in lists["splits"]]
                runs += [(c, {"split": v, "cluster": True}, "forced cluster") for v in lists["clusters"]]
        if a.default:
            runs.append((None, {}, "default"))           # topk(x, k): the committed per-workload config
        seen = set()
        for cfg, opts, run in runs:
            kern = kernels[cfg] if cfg else None
            register_path(tk, run != "sampled cluster")
            out, diag = tk.topk(x, a.k, kernel=kern, return_diagnostics=True, **opts)
            d = tk.plan_for(x, a.k, kernel=kern, **opts).launches[0][0].defines
            if cfg is None:                               # the default: its config from the plan
                cfg = (int(d["SGL_TOPK_DYNAMIC_SMEM_BYTES"]), int(d["TOPK_COARSE_BITS"]), int(d["TOPK_THREADS"]))
            bud, nbits, nthr = cfg
            path = (cfg, diag["split"], diag["cluster"], diag["cluster_regs"], diag["resident"])
            if path in seen and run != "default":
                continue                                  # a comparison run that changed nothing
            seen.add(path)
            ok, why = ref.check_topk(x[:nchk].cpu(), None, a.k, out[:nchk].cpu())
            fn = lambda: tk.topk(x, a.k, kernel=kern, **opts)   # noqa: E731
            med, iqr, p90 = kernel_time(fn, a.reps)
            host_us, serve_us = serving_loop(torch, fn, a.serve_calls)
            rows.append({"B": B, "L": L, "K": a.k, "budget": bud, "bits": nbits, "threads": nthr,
                         "block_threads": int(d["TOPK_THREADS"]),
                         "split": diag["split"], "cluster": diag["cluster"], "cluster_regs": diag["cluster_regs"],
                         "resident": diag["resident"], "run": run,
                         "dist": dist, "median_us": round(med, 2), "iqr_us": round(iqr, 2),
                         "p90_us": round(p90, 2), "p90_x_median": round(p90 / med, 3),
                         "GBps": round(B * L * 4 / (med * 1e-6) / 1e9, 1),
                         "floor_us": round(floor_us, 2), "x_floor": round(med / floor_us, 2),
                         "pct_of_floor_speed": round(100 * floor_us / med, 1),
                         "read_once_us": round(probe_us, 2), "x_read_once": round(med / probe_us, 2),
                         "read_once_probe": probe[(B, L)][1],
                         "torch_us": round(t_ref, 2), "torch_iqr_us": round(iqr_ref, 2),
                         "speedup_vs_torch": round(t_ref / med, 2), "serve_us": round(serve_us, 2),
                         "host_us": round(host_us, 2), "torch_serve_us": round(ref_serve, 2),
                         "torch_host_us": round(ref_host, 2), "launcher": diag["launcher"],
                         "overflow_rows": diag["overflow_rows"],
                         **{name: diag[name] for name in tk.ROW_FLAGS}, "verified": ok,
                         "verify_note": why, **prov, "copy_TBps": round(bw / 1e12, 3),
                         "flush": "2x L2 write (engine)"})
            r = rows[-1]
            print(f"B={B:4d} L={L:8d} budget={bud // 1024:4d}K bits={nbits:2d} thr={nthr:4d} {_path(r):>6} {run:>12}"
                  f"  {med:9.1f} us (iqr {iqr:6.1f}, p90 {p90 / med:4.2f}x)  "
                  f"floor {floor_us:7.1f} ({r['x_floor']:5.2f}x)  torch {t_ref:8.1f} us  "
                  f"speedup {r['speedup_vs_torch']:5.2f}x  serve {serve_us:7.1f} us  host {host_us:5.1f} us  "
                  f"overflow {diag['overflow_rows']} {_flags(r, tk.ROW_FLAGS)} {dist}  "
                  f"{'ok' if ok else 'WRONG: ' + why}", flush=True)
        del x
        register_path(tk, True)
        torch.cuda.empty_cache()
    try:
        wrote = write_csv(a.out, rows, KEY)
    except UserError as e:
        return refuse(e)
    summary(rows)
    print(wrote)
    return 0 if all(r["verified"] for r in rows) else 1


_REGS_VALUES = {}


def register_path(tk, on: bool) -> None:
    """Let the plan take the cluster kernel's register path (the default) or not (the sampled
    path at the same cluster size, for comparison); plans are made again after a change."""
    from occtune.kernels.topk import runtime        # cluster_regs reads its CLUSTER_REGS_VALUES

    default = _REGS_VALUES.setdefault("default", runtime.CLUSTER_REGS_VALUES)
    want = default if on else 0
    if runtime.CLUSTER_REGS_VALUES != want:
        runtime.CLUSTER_REGS_VALUES = want
        tk.clear_plans()


def _path(r) -> str:
    """A run's path in a few characters: r<parts> resident, <S>c / <S>cr cluster (register path),
    <S> split kernel or one block a row; "@<T>" where its blocks have T threads, not the config's
    (short rows' clusters take policy.short_cluster's)."""
    if r.get("resident"):
        p = f"r{r['resident']}"
    else:
        p = f"{r['split']}{('cr' if r['cluster_regs'] else 'c') if r['cluster'] else ''}"
    bt = r.get("block_threads")
    return p + (f"@{bt}" if bt and bt != r["threads"] else "")


def target_us(B: int, L: int, read1: float) -> float:
    """Issue 33's target: 1.5x the read-once probe up to 2**23 scores a call, 1.2x above."""
    return (1.5 if B * L <= 1 << 23 else 1.2) * read1


def decode_table(rows):
    """Issue 33's table: per shape the fastest measured run (any config and path) beside the
    read-once probe of the same run, the target, met or missed; and the default config's time."""
    print("\nissue 33 (decode): ours = the fastest run measured per shape; read1 = the read-once probe, "
          "same loan; target <= 1.5x read1 up to 2^23 scores, 1.2x above")
    print("| (B, L) | ours us | config | read1 us | ours / read1 | target us | | default us | default config |")
    print("|---|---:|---|---:|---:|---:|---|---:|---|")
    for (B, L) in sorted({(r["B"], r["L"]) for r in rows}, key=lambda s: s[0] * s[1]):
        same = [r for r in rows if (r["B"], r["L"]) == (B, L) and r["dist"] == "random_normal"]
        if not same:
            continue
        best = min(same, key=lambda r: r["median_us"])
        read1 = best["read_once_us"]
        tgt = target_us(B, L, read1)
        dflt = next((r for r in same if r["run"] == "default"), None)
        dtxt = (f"{dflt['median_us']:.1f} | {dflt['budget'] // 1024}K/{dflt['threads']} {_path(dflt)}"
                if dflt else "- | -")
        print(f"| ({B}, {L}) | {best['median_us']:.1f} | {best['budget'] // 1024}K/{best['bits']}-bit/{best['threads']} "
              f"{_path(best)} | {read1:.1f} | {best['median_us'] / read1:.2f} | {tgt:.1f} | "
              f"{'met' if best['median_us'] <= tgt else 'missed'} | {dtxt} |")


def summary(rows):
    best = {}
    for r in rows:
        key = (r["B"], r["L"])
        if key not in best or r["median_us"] < best[key]["median_us"]:
            best[key] = r
    print("\nsummary (best config per shape; read1: the read-once probe; serve/host: the serving loop, "
          "per call)")
    print(f"{'B':>5} {'L':>9} {'budget':>7} {'bits':>4} {'thr':>4} {'split':>6} {'us':>9} {'x floor':>8} "
          f"{'read1 us':>8} {'serve us':>9} {'host us':>8} {'torch us':>9} {'t.serve':>8} {'t.host':>7} {'speedup':>8}")
    for (B, L), r in sorted(best.items()):
        sp = _path(r)
        print(f"{B:5d} {L:9d} {r['budget'] // 1024:6d}K {r['bits']:4d} {r['threads']:4d} {sp:>6} {r['median_us']:9.1f} "
              f"{r['x_floor']:8.2f} {r['read_once_us']:8.1f} {r['serve_us']:9.1f} {r['host_us']:8.1f} {r['torch_us']:9.1f} "
              f"{r['torch_serve_us']:8.1f} {r['torch_host_us']:7.1f} {r['speedup_vs_torch']:7.2f}x")
    print("\ntargets (issue 4): >= 5x torch at (64,128K) and (256,1M); <= 2x floor at B=256, L>=128K")
    for (B, L), goal in (((64, 131072), "speedup"), ((256, 1 << 20), "speedup")):
        r = best.get((B, L))
        if r:
            print(f"  ({B}, {L}): {r['speedup_vs_torch']:.2f}x vs torch  "
                  f"[{'met' if r['speedup_vs_torch'] >= 5 else 'NOT met'}]")
    for (B, L), r in sorted(best.items()):
        if B == 256 and L >= 131072:
            print(f"  ({B}, {L}): {r['x_floor']:.2f}x the read floor  "
                  f"[{'met' if r['x_floor'] <= 2 else 'NOT met'}]")
    worst = max(rows, key=lambda r: r["p90_x_median"])
    print(f"  p90 (issue 17: within 1.2x of the median everywhere): worst {worst['p90_x_median']:.2f}x at "
          f"({worst['B']}, {worst['L']}) {worst['budget'] // 1024}K/{worst['bits']}-bit/{worst['threads']} "
          f"{worst['run']}  [{'met' if worst['p90_x_median'] <= 1.2 else 'NOT met'}]")
    plan_check(rows)
    overflow_check(rows)
    decode_table(rows)
    bad = [r for r in rows if not r["verified"]]
    print(f"  verification: {len(rows) - len(bad)}/{len(rows)} configs exact")


def plan_check(rows):
    """Issue 17: the launcher's own choice (run "plan") against the fastest path measured for the
    same config and shape (comparison runs), and each config's plan against the shape's best."""
    print("\nplan check (issue 17: the plan's path within 1.5x of the best measured path, per config)")
    groups = {}
    for r in (r for r in rows if r["run"] != "default"):
        groups.setdefault((r["B"], r["L"], r["budget"], r["bits"], r["threads"]), []).append(r)
    for (B, L, bud, nbits, nthr), rs in sorted(groups.items()):
        plan = next((r for r in rs if r["run"] == "plan"), None)
        fastest = min(rs, key=lambda r: r["median_us"])
        if plan is None or len(rs) < 2:
            continue
        ratio = plan["median_us"] / fastest["median_us"]
        print(f"  ({B}, {L}) {bud // 1024}K {nbits}-bit {nthr} thr: plan {_path(plan)}"
              f" {plan['median_us']:.1f} us, best {fastest['run']} "
              f"{_path(fastest)} {fastest['median_us']:.1f} us: {ratio:.2f}x"
              f"  [{'ok' if ratio <= 1.5 else 'OFF'}]")
    for (B, L) in sorted({(r["B"], r["L"]) for r in rows}):
        plans = [r for r in rows if (r["B"], r["L"]) == (B, L) and r["run"] == "plan"]
        top = min(r["median_us"] for r in plans)
        slow = [f"{r['budget'] // 1024}K/{r['bits']}-bit/{r['threads']} {r['median_us'] / top:.2f}x"
                for r in plans if r["median_us"] > 1.5 * top]
        if slow:
            print(f"  ({B}, {L}) configs over 1.5x the shape's best plan ({top:.1f} us): {', '.join(slow)}")


def _flags(r, names) -> str:
    """The nonzero per-row flag counts of a run, e.g. 'bin_overflow 64 spilled 2' ('' if none)."""
    return " ".join(f"{n.removesuffix('_rows')} {r[n]}" for n in names if r.get(n))


def overflow_check(rows):
    """Issue 17: each run with an overflowed row (any kernel flag, or a bin over the capacity)
    against the fastest run of the same shape without one (any config, family or path)."""
    from occtune.kernels.topk import ROW_FLAGS

    def overflowed(r):
        return r["overflow_rows"] or any(r.get(n) for n in ROW_FLAGS)

    print("\noverflow check (issue 17: a run with overflowed rows within 2x of the shape's fastest run without)")
    for (B, L) in sorted({(r["B"], r["L"]) for r in rows}):
        same = [r for r in rows if (r["B"], r["L"]) == (B, L)]
        clean = [r for r in same if not overflowed(r)]
        over = [r for r in same if overflowed(r)]
        if not over:
            continue
        if not clean:
            print(f"  ({B}, {L}): every run overflowed; no reference at this shape")
            continue
        top = min(clean, key=lambda r: r["median_us"])
        for r in over:
            ratio = r["median_us"] / top["median_us"]
            print(f"  ({B}, {L}) {r['dist']} {r['budget'] // 1024}K {r['bits']}-bit {r['threads']} thr "
                  f"{_path(r)} ({r['run']}): {r['median_us']:.1f} us "
                  f"[{_flags(r, ROW_FLAGS)}; {r['overflow_rows']} over capacity] vs {top['median_us']:.1f} us "
                  f"({top['dist']} {top['budget'] // 1024}K {top['bits']}-bit): {ratio:.2f}x  "
                  f"[{'ok' if ratio <= 2 else 'OVER 2x'}]")


if __name__ == "__main__":
    sys.exit(main())
