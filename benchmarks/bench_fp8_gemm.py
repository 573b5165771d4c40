#!/usr/bin/env python3
"""Benchmark the FP8 block-scaled GEMM backends on DeepSeek-V4's shapes and write the allow-list.

    python3 benchmarks/bench_fp8_gemm.py                       # 14 shapes x 9 M, all backends
    python3 benchmarks/bench_fp8_gemm.py --shapes 7168,2048 --m 1,1024 --rep-ms 10

Per (n, k) and M: our Triton kernel over the profile's configs for that M bucket (6-8, plus the
untuned baseline), and every vendor path of backends.py (a missing one is a row with the probe's
reason). Every output is verified against the float64 reference (computed once per workload)
before it is timed with the engine's timer (occtune.engine.bench.BenchTimer: CUDA events, L2
flushed before each launch, launch overhead hidden). Reported: median us and IQR, TFLOP/s and %
of the target's dense fp8 peak, the choice of the allow-list and its margin, the geometric-mean
speed-up of the allow-list over "always Triton" and over "always the library", and the issue's
two performance checks (Triton within 1.25x of the library for M >= 1024; the allow-list at least
as fast as the better single-backend policy on every shape, up to the measured noise).

Writes, under --out-dir (default results/<target>/), atomically: fp8_gemm_bench.csv (every row),
fp8_gemm_bench.md (the table, the summary, provenance), fp8_gemm_allowlist_<target>.json and
fp8_gemm_use_triton_<target>.py (the exports of allowlist.py).
"""

from __future__ import annotations

import argparse
import csv
import io
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", help="n,k;n,k;... (default: profile.yaml's 14 DeepSeek-V4 shapes)")
    p.add_argument("--m", help="token counts, e.g. 1,8,1024 (default: profile.yaml's)")
    p.add_argument("--backends", help="comma list (default: profile.yaml's for this vendor)")
    p.add_argument("--rep-ms", type=float, default=20.0, help="timing budget per point (ms)")
    p.add_argument("--warmup-ms", type=float, default=5.0)
    p.add_argument("--triton", help="explicit Triton configs 'BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,"
                                    "num_stages;...' on every M (default: profile.yaml's per-M buckets)")
    p.add_argument("--out-dir", help="where to write (default results/<target>/)")
    p.add_argument("--device", default="cuda", help="cuda, or cpu to try the script under TRITON_INTERPRET=1 "
                                                    "(target sm_90 assumed, times meaningless)")
    p.add_argument("--smoke-s", type=float, default=0.0,
                   help="first run every Triton config once on a small ragged problem, each in its own process "
                        "with this time limit, all at once, and drop the ones that fail or hang (0: off)")
    p.add_argument("--smoke-config", help=argparse.SUPPRESS)     # the child of --smoke-s: one config (JSON)
    return p.parse_args(argv)


def log(text: str) -> None:
    print(text, flush=True)


def measure_workload(fam, w, configs, timer, seed=0, device="cuda"):
    """Rows (engine-style dicts) of every config on one workload; the reference is computed once."""
    from occtune.kernels.fp8_gemm.family import expected_rows, verify

    inp = fam.make_inputs(w, seed, device)
    exp = expected_rows(inp)
    rows = []
    for cfg in configs:
        ok, why = fam.is_valid(cfg, w)
        if not ok:
            continue
        rows.append(_one(fam, cfg, w, inp, exp, timer, verify, device))
    return rows


def _one(fam, cfg, w, inp, exp, timer, verify, device):
    from occtune.engine.workunit import sync

    row = {"config": cfg, "workload": w, "status": "ok", "reason": ""}
    try:
        built = fam.build(cfg, device)
    except Exception as e:  # noqa: BLE001 - a missing library is a row, not a crash
        return {**row, "status": "missing" if cfg["backend"] != "triton" else "built_failed", "reason": str(e)}
    try:
        inp.out.fill_(float("nan"))
        res = verify(fam.run(built, inp), inp, exp)
        sync(device)
        if not res.ok:
            return {**row, "status": "wrong", "reason": res.reason, **res.diagnostics}
        t = timer(lambda: fam.run(built, inp), context={"config": cfg, "device": str(device)})
    except Exception as e:  # noqa: BLE001
        return {**row, "status": "crashed", "reason": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    return {**row, "median_us": t.median_us, "q1_us": t.q1_us, "q3_us": t.q3_us,
            "rel_l2": res.diagnostics.get("rel_l2")}


def cfg_text(c: dict) -> str:
    from occtune.kernels.fp8_gemm.cli import _cfg_text

    return c["backend"] if c["backend"] != "triton" else "triton " + _cfg_text(c)


def progress_line(i, n, w, rows, t0, safety) -> str:
    from occtune.kernels.fp8_gemm.allowlist import decide

    d = decide(rows, safety)
    from occtune.kernels.fp8_gemm.cli import _cfg_text

    lib = f"{d['library_backend']} {d['library_us']:.1f} us" if d["library_us"] else "no library"
    tri = f"triton {d['triton_us']:.1f} us ({_cfg_text(d['triton_config'])})" if d["triton_us"] else "no triton"
    ratio = f", triton/library {d['triton_us'] / d['library_us']:.2f}x" if d["triton_us"] and d["library_us"] else ""
    margin = "" if d["margin"] is None else f" ({d['margin']:+.0%})"
    return (f"[{i}/{n}] n={w['N']} k={w['K']} M={w['M']}: {tri}, {lib}{ratio} -> {d['backend']}{margin}  "
            f"({time.perf_counter() - t0:.0f} s)")


def tflops(w, us):
    return 2 * w["M"] * w["N"] * w["K"] / (us * 1e-6) / 1e12 if us else None


def csv_text(rows, peak) -> str:
    buf = io.StringIO()
    wr = csv.writer(buf)
    wr.writerow(["n", "k", "M", "backend", "config", "status", "median_us", "q1_us", "q3_us", "tflops",
                 "pct_fp8_peak", "rel_l2", "reason"])
    for r in rows:
        w, us = r["workload"], r.get("median_us")
        tf = tflops(w, us)
        wr.writerow([w["N"], w["K"], w["M"], r["config"]["backend"], cfg_text(r["config"]), r["status"],
                     _r(us), _r(r.get("q1_us")), _r(r.get("q3_us")), _r(tf, 1),
                     _r(100 * tf * 1e12 / peak if tf and peak else None, 1), r.get("rel_l2", ""), r.get("reason", "")])
    return buf.getvalue()


def _r(x, nd=3):
    return "" if x is None else round(x, nd)


def checks(doc) -> list[str]:
    """The issue's performance checks, as printed lines (measured, not asserted)."""
    out = []
    far = []
    for key, s in doc["shapes"].items():
        for p in s["points"]:
            if p["m"] >= 1024 and p["triton_us"] and p["library_us"]:
                far.append((p["triton_us"] / p["library_us"], key, p["m"]))
    if far:
        worst = max(far)
        n_ok = sum(r <= 1.25 for r, _, _ in far)
        out.append(f"Triton within 1.25x of the library for M >= 1024: {n_ok}/{len(far)} points; worst "
                   f"{worst[0]:.2f}x at n,k={worst[1]} M={worst[2]}")
    else:
        out.append("Triton within 1.25x of the library for M >= 1024: not measurable (no library timed)")
    for key, s in doc["shapes"].items():
        pts = [p for p in s["points"] if p["triton_us"] and p["library_us"]]
        if not pts:
            continue
        chosen = [p["triton_us"] if p["backend"] == "triton" else p["library_us"] for p in pts]
        g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))  # noqa: E731
        vs_t = g([p["triton_us"] / c for p, c in zip(pts, chosen)])
        vs_l = g([p["library_us"] / c for p, c in zip(pts, chosen)])
        verdict = "ok" if min(vs_t, vs_l) >= 0.99 else "SLOWER than a single policy (inside ties?)"
        out.append(f"  {key}: allow-list vs always-triton {vs_t:.3f}x, vs always-library {vs_l:.3f}x: {verdict}")
    return out


def markdown(doc, rows, target, peak, wall_s) -> str:
    from occtune.kernels.fp8_gemm.cli import _cfg_text, _f

    prov = doc["provenance"]
    lines = [f"# FP8 block-scaled GEMM on {target.name}: Triton vs the vendor library", "",
             f"Device {prov.get('device')}, torch {prov.get('torch')}, triton {prov.get('triton')}, "
             f"git {prov.get('git_revision')}, {prov.get('date')}; {wall_s:.0f} s. fp8 dense peak "
             f"{_f(peak / 1e12 if peak else None, '.1f')} TFLOP/s ({_peak_source(target)}).", "",
             "Times are medians of CUDA-event samples with the L2 flushed before each launch; every output "
             "was verified against the float64 reference first (relative L2 and max-abs <= 2^-7). "
             "Rows tied with the fastest one (IQR overlap or < 1%) go to the library.", "",
             "| n,k | M | Triton us | Triton config | library us | library | TFLOP/s (chosen) | % fp8 peak | choice | margin |",
             "|---|---:|---:|---|---:|---|---:|---:|---|---:|"]
    for key, s in doc["shapes"].items():
        for p in s["points"]:
            us = p["triton_us"] if p["backend"] == "triton" else p["library_us"]
            tf = 2 * p["m"] * s["n"] * s["k"] / (us * 1e-6) / 1e12 if us else None
            tc = p["triton_config"]
            cfg = "-" if tc is None else _cfg_text(tc)
            lines.append(f"| {key} | {p['m']} | {_f(p['triton_us'])} | {cfg} | {_f(p['library_us'])} | "
                         f"{p['library_backend'] or '-'} | {_f(tf, '.1f')} | "
                         f"{_f(100 * tf * 1e12 / peak if tf and peak else None, '.1f')} | {p['backend']} | "
                         f"{'' if p['margin'] is None else format(p['margin'], '+.1%')} |")
    sm = doc["summary"]
    lines += ["", f"Triton chosen on {sm['triton_points']} of {sm['points']} points. Geometric-mean speed-up of "
              f"the allow-list over always-Triton: {_f(sm['speedup_vs_always_triton'], '.3f')}x; over "
              f"always-the-library: {_f(sm['speedup_vs_always_library'], '.3f')}x ({sm['points_with_both']} "
              "points with both).", ""]
    lines += [f"- {c}" for c in checks(doc)]
    missing = doc["missing_backends"]
    if missing:
        lines += ["", "Backends that could not run here:"] + [f"- {b}: {why}" for b, why in missing.items()]
    bad = [r for r in rows if r["status"] not in ("ok", "missing")]
    if bad:
        lines += ["", "Rows that failed (excluded from the choice):"] + [
            f"- {r['workload']} {cfg_text(r['config'])}: {r['status']}: {r['reason']}" for r in bad[:40]]
    return "\n".join(lines) + "\n"


SMOKE_MNK = (300, 2112, 7168)      # a ragged M tile, N = 16.5 x 128, the seed's common K
SMOKE_MNK_CPU = (37, 200, 320)     # under the interpreter


def smoke_child(cfg_json: str, device: str) -> int:
    """--smoke-config: run one Triton config once on SMOKE_MNK and verify it (exit 0 when right)."""
    import json

    from occtune.kernels.fp8_gemm.family import make_gemm_inputs, verify
    from occtune.kernels.fp8_gemm.kernel import launch
    from occtune.engine.workunit import sync

    inp = make_gemm_inputs(*(SMOKE_MNK_CPU if device == "cpu" else SMOKE_MNK), 0, device)
    launch(inp.a, inp.a_s, inp.b, inp.b_s, inp.out, json.loads(cfg_json))
    sync(device)
    res = verify(inp.out, inp)
    print("ok" if res.ok else f"wrong: {res.reason}")
    return 0 if res.ok else 1


def smoke_filter(configs: list, workloads: list, fam, limit_s: float, device: str) -> list:
    """``configs`` less the Triton ones whose smoke child fails or outlives ``limit_s`` (a hang
    would otherwise stop the whole benchmark), and less those no workload here times; the
    children also fill Triton's kernel cache."""
    import json
    import subprocess
    from concurrent.futures import ThreadPoolExecutor

    def one(c):
        argv = [sys.executable, __file__, "--device", device, "--smoke-config", json.dumps(c)]
        try:
            r = subprocess.run(argv, capture_output=True, text=True, timeout=limit_s)
        except subprocess.TimeoutExpired:
            return f"no result within {limit_s:.0f} s (hung?)"
        lines = (r.stdout + r.stderr).strip().splitlines() or [f"exit code {r.returncode}"]
        return "" if r.returncode == 0 else lines[-1][:200]

    tri = [c for c in configs if c["backend"] == "triton" and any(fam.is_valid(c, w)[0] for w in workloads)]
    with ThreadPoolExecutor(max_workers=max(1, len(tri))) as ex:
        why = dict(zip(map(json.dumps, tri), ex.map(one, tri)))
    for c in tri:
        log(f"smoke {cfg_text(c)}: {why[json.dumps(c)] or 'ok'}")
    return [c for c in configs if c["backend"] != "triton" or why.get(json.dumps(c)) == ""]


def _peak_source(target) -> str:
    p = target.params.get("peak_fp8_dense_flops")
    return p.source if p else "no peak in the target profile"


def main(argv=None) -> int:
    import torch

    from occtune.outputs import provenance
    from occtune.engine.bench import BenchTimer
    from occtune.fsutil import atomic_write_text
    from occtune.kernels.fp8_gemm import allowlist
    from occtune.kernels.fp8_gemm.backends import availability
    from occtune.kernels.fp8_gemm.cli import _f, parse_backends, parse_shapes, parse_triton
    from occtune.kernels.fp8_gemm.config import load_profile
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily
    from occtune.model.targets import detect, load_target
    from occtune.units import parse_int_list

    args = parse_args(argv)
    if args.smoke_config:
        return smoke_child(args.smoke_config, args.device)
    if args.device == "cpu":
        name = "sm_90"
    else:
        det = detect()
        if det["target"] is None or not torch.cuda.is_available():
            print(f"error: needs a GPU of a known target (found: {det['device']})", file=sys.stderr)
            return 2
        name = det["target"]
    target = load_target(name)
    prof = load_profile()
    workloads = prof.workloads(parse_shapes(args.shapes), parse_int_list(args.m, "--m") if args.m else None)
    fam = Fp8GemmFamily(workloads, target=target.name, backends=parse_backends(args.backends, target.vendor),
                        triton_configs=parse_triton(args.triton, target.name))
    avail = {b: availability(b, args.device, fam.fp8) for b in fam.backends if b != "triton"}
    for b, a in avail.items():
        log(f"backend {b}: {'available ' + str({k: v for k, v in a.detail.items() if k != 'tried'}) if a.ok else a.reason}")
    timer = BenchTimer(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms)
    configs = fam.configs()
    if args.smoke_s > 0:
        configs = smoke_filter(configs, workloads, fam, args.smoke_s, args.device)
    t0, rows = time.perf_counter(), []
    for i, w in enumerate(workloads, 1):
        wrows = measure_workload(fam, w, configs, timer, seed=i, device=args.device)
        rows += wrows
        log(progress_line(i, len(workloads), w, wrows, t0, fam.safety_key))
    wall = time.perf_counter() - t0
    prov = provenance.for_device(args.device, timer=f"BenchTimer(warmup_ms={args.warmup_ms}, rep_ms={args.rep_ms})",
                                 source_hash=fam.source_hash())
    doc = allowlist.build(rows, fam.safety_key, prov, target=target.name,
                          missing={b: a.reason for b, a in avail.items() if not a.ok})
    peak = getattr(target, "peak_fp8_dense_flops", None)
    out = Path(args.out_dir) if args.out_dir else Path(__file__).resolve().parents[1] / "results" / target.name
    texts = {"fp8_gemm_bench.csv": csv_text(rows, peak), "fp8_gemm_bench.md": markdown(doc, rows, target, peak, wall),
             f"fp8_gemm_allowlist_{target.name}.json": allowlist.render_json(doc),
             f"fp8_gemm_use_triton_{target.name}.py": allowlist.render_predicate(doc)}
    for name, text in texts.items():
        log(f"wrote {atomic_write_text(out / name, text)}")
    sm = doc["summary"]
    log(f"Triton chosen on {sm['triton_points']}/{sm['points']} points; allow-list vs always-triton "
        f"{_f(sm['speedup_vs_always_triton'], '.3f')}x, vs always-library {_f(sm['speedup_vs_always_library'], '.3f')}x")
    for line in checks(doc):
        log(line)
    log(f"done in {time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
