"""`tune fp8-gemm`: our Triton FP8 block-scaled GEMM against the vendor libraries, per (n, k) and M.

The verb builds a :class:`occtune.pipeline.SweepRequest` and runs the one pipeline. On the local
GPU's target: every backend is probed (a missing one is listed with the reason), then the timed
sweep runs through the engine (cache, workers, progress), results go to
``<out>/<target>/fp8_gemm.yaml`` and the allow-list (allowlist.py) is built from the verified
rows: per (n, k) and M, Triton or the library, by how much. ``--export DIR`` writes it as
vLLM/sglang-style JSON and as a Python predicate ``use_triton(n, k, m)``.

On any other target (or with --analytic): the Triton configs are cross-compiled for that target
(no GPU) and the table shows registers, LDS, occupancy and the limiter, with no winner (occupancy
does not rank GEMM tiles); nothing is timed, and the library paths of that target are reported as
not measured. The tables, the allow-list and the exports below are :class:`Fp8GemmFamily`'s hooks.
"""

from __future__ import annotations

import click

from occtune.engine.options import from_cli, results_options, sweep_options, timed_options_given
from occtune.errors import UserError
from occtune.units import parse_int_list

TRITON_FMT = "BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages[,PIPE]"


def parse_shapes(text: str | None) -> list[tuple[int, int]] | None:
    if not text:
        return None
    out = []
    for part in (p.strip() for p in text.split(";")):
        nums = [x.strip() for x in part.split(",")] if part else []
        if len(nums) != 2 or not all(x.isdigit() and int(x) > 0 for x in nums):
            raise UserError(f"--shapes: {part!r} is not n,k; write e.g. --shapes '7168,2048;512,7168'")
        out.append((int(nums[0]), int(nums[1])))
    return out


def parse_triton(text: str | None, target: str) -> list[dict] | None:
    """--triton's configs, each checked against ``target`` (a PIPE it lacks is an error, not dropped)."""
    from .config import config_problem, triton_row, validate_config

    if not text:
        return None
    out = []
    for part in (p.strip() for p in text.split(";") if p.strip()):
        cfg = triton_row(parse_int_list(part, "--triton"), f"--triton {part!r}")
        validate_config({"backend": "triton", **cfg}, "sm_90")      # names and values (AMD options come later)
        why = config_problem(cfg, target)
        if why:
            raise UserError(f"--triton {part!r}: {why}")
        out.append(cfg)
    return out


def parse_backends(text: str | None, vendor: str) -> list[str] | None:
    from .backends import BACKENDS, backends_for

    if not text:
        return None
    names = backends_for(vendor) if text.strip() == "all" else [b.strip() for b in text.split(",") if b.strip()]
    bad = [b for b in names if b not in BACKENDS]
    if bad or not names:
        raise UserError(f"--backends {text!r}: choose from {','.join(BACKENDS)} (or 'all')")
    wrong = [b for b in names if vendor not in BACKENDS[b][0]]
    if wrong:
        raise UserError(f"--backends: {', '.join(wrong)} do(es) not run on {vendor} targets")
    return list(dict.fromkeys(names))


@click.command("fp8-gemm")
@click.option("--target", "target_name", help="Target (default: the local GPU). Another target: analytic table.")
@click.option("--shapes", help="(n, k) shapes 'n,k;n,k;...' (default: the 14 DeepSeek-V4 shapes of profile.yaml).")
@click.option("--m", "ms", help="Token counts M, e.g. 1,8,128 (default: profile.yaml's 1..16384).")
@click.option("--backends", help="Backends to compare, e.g. triton,torch_scaled_mm, or 'all' (default: profile.yaml's).")
@click.option("--triton", "triton_text", help=f"Explicit Triton configs '{TRITON_FMT};...' timed on every M "
                                              "(default: profile.yaml's per-M buckets and the baseline). PIPE: 0 "
                                              "pointer loads (any target, the default); 1 TMA, 2 TMA + warp "
                                              "specialisation, 3 persistent (sm_90+); 4-7 the Gluon wgmma kernel: "
                                              "per tile, persistent, persistent + TMA producer warp, the same with "
                                              "each consumer warp group on its own (sm_90 only); 8, 9 the split-K "
                                              "decode kernel, partials added by a second kernel or by the tile's "
                                              "last program (any target).")
@click.option("--analytic", is_flag=True, help="Cross-compiled resources and occupancy only, even on the GPU.")
@click.option("--export", "export_dir", help="Write the allow-list JSON and the use_triton predicate here.")
@results_options
@sweep_options
def command(target_name, shapes, ms, backends, triton_text, analytic, out_dir, no_write, force, export_dir, as_json,
            show_all, **opts):
    """Time the Triton FP8 GEMM against the vendor libraries; build the per-(n, k, M) allow-list."""
    from occtune.model.targets import resolve_target

    from .config import load_profile
    from .family import Fp8GemmFamily

    from occtune.pipeline import SweepRequest, run_request

    run, timing = from_cli(opts)
    prof = load_profile()
    workloads = prof.workloads(parse_shapes(shapes), parse_int_list(ms, "--m") if ms else None)
    target, _ = resolve_target(target_name, "the analytic table of cross-compiled resources and occupancy")
    fam = Fp8GemmFamily(workloads, target=target.name, backends=parse_backends(backends, target.vendor),
                        triton_configs=parse_triton(triton_text, target.name), export_dir=export_dir)
    from occtune.engine.family import check_workload

    for w in fam.workloads():
        check_workload(fam, w, "--shapes/--m")
    req = SweepRequest(family=fam.name, target=target.name, analytic=analytic, out_dir=out_dir,
                       write=not no_write, force=force,
                       as_json=as_json, show_all=show_all, run=run, timing=timing,
                       timed_flags=timed_options_given(click.get_current_context()))
    run_request(req, fam)


# --- Fp8GemmFamily's analytic hooks: the table and the --json keys ------------------------------

def _buckets(fam) -> list[int]:
    return sorted({fam.profile.bucket_of(w["M"]) for w in fam.workloads()})


def _label(fam, target) -> str:
    return (f"analytic: each Triton config cross-compiled by Triton for {target.name} (no GPU), occupancy "
            f"from the model; nothing timed; fp8 type {fam.fp8}")


def _libraries(fam) -> dict:
    return {b: "not measured: analytic run (no GPU); tune fp8-gemm on the target probes and times it"
            for b in fam.backends if b != "triton"}


def _left_out(fam) -> list:
    return fam.profile.left_out(fam.target, _buckets(fam)) if "triton" in fam.backends else []


def check_analytic_space(fam, configs, target) -> None:
    if fam.export_dir:
        raise UserError("--export needs timed results: run tune fp8-gemm on a GPU of the target")
    if any(c.get("backend") == "triton" for c in configs):
        return
    raise UserError(f"no Triton config to analyse for {target.name}: the analytic run reads the Triton kernel's "
                    "compiled resources (add triton to --backends)")


def analytic_json(fam, result, target) -> dict:
    """What ``tune fp8-gemm --json`` adds to the analytic results document."""
    return {"analytic": True, "label": _label(fam, target), "fp8_dtype": fam.fp8,
            "resources_workload": fam._representative(), "left_out": _left_out(fam), "why": result.why,
            "library_backends": _libraries(fam), "unconfirmed_target_parameters": target.unconfirmed()}


def show_analytic(fam, result, target, view, path) -> bool:
    from occtune.output import console

    _print_analytic(fam, target, result, view, console)
    for g in _left_out(fam):
        console.print(f"not listed for {target.name}: {g['configs']} config(s) of the profile with PIPE "
                      f"{', '.join(map(str, g['pipes']))}: {g['reason']}")
    if path:
        console.print(f"wrote {path}")
    return True


def _cfg_text(c: dict) -> str:
    short = {"matrix_instr_nonkdim": "mi", "waves_per_eu": "wpe", "kpack": "kp"}
    text = f"{c['BLOCK_M']}x{c['BLOCK_N']}x{c['BLOCK_K']} g{c['GROUP_M']} w{c['num_warps']} s{c['num_stages']}"
    return " ".join([text] + [f"{v}{c[k]}" for k, v in short.items() if k in c] + pipe_text(c))


def pipe_text(c: dict) -> list[str]:
    """[] for pointer loads (PIPE 0), else ["tma"], ["tma+ws"], ["persistent"], ["wgmma"],
    ["wgmma+persistent"], ["wgmma+persistent+ws"], ["wgmma+persistent+ws+halves"], ["splitk"],
    ["splitk+1pass"] or ["splitk+wgmma"] (kernel.py's PIPE)."""
    names = {1: "tma", 2: "tma+ws", 3: "persistent", 4: "wgmma", 5: "wgmma+persistent", 6: "wgmma+persistent+ws",
             7: "wgmma+persistent+ws+halves", 8: "splitk", 9: "splitk+1pass", 10: "splitk+wgmma"}
    return [names[c["PIPE"]]] if c.get("PIPE") else []


def _print_analytic(fam, target, res, view, console) -> None:
    from rich.table import Table

    from occtune.outputs.display import analytic_rest, skipped_lines, top

    unit = "CU" if target.is_amd else "SM"
    w = fam._representative()
    console.print(f"[bold]fp8-gemm --target {target.name}[/]: {_label(fam, target)}")
    console.print(f"resources read for M={w['M']} N={w['N']} K={w['K']}")
    t = Table()
    regs = ("VGPRs", "AGPRs", "SGPRs") if target.is_amd else ("regs",)
    for col in ("config", "threads", *regs, "LDS B", f"blk/{unit}", "occ.", "limiter",
                *(("LLVM occ.",) if target.is_amd else ())):
        t.add_column(col, justify="left" if col in ("config", "limiter") else "right", overflow="fold")
    shown, rest = top(res.rows, show_all=view.show_all, limit=view.limit)
    for r in shown:
        nums = [str(r["vgprs"]), str(r["agprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        lds = r["static_lds_bytes"] + r["dynamic_lds_bytes"]
        t.add_row(_cfg_text(r["config"]), str(r["threads"]), *nums, str(lds),
                  str(r["blocks_per_cu"]) if r["fits"] else "no fit", f"{r['occupancy']:.0%}",
                  r["limiter"] if r["fits"] else r["reason"],
                  *((str(r["compiler_occupancy"]),) if target.is_amd else ()))
    console.print(t)
    if rest:
        console.print(analytic_rest(rest))
    libs = _libraries(fam)
    tiles = [s for s in res.skipped if s["config"].get("backend") == "triton"]     # libraries: the lines below
    for line in skipped_lines(tiles, label=_cfg_text, show_all=view.show_all):
        console.print(line)
    for b, why in libs.items():
        console.print(f"{b}: {why}")
    console.print(res.why)


# --- Fp8GemmFamily's timed plan: backends probed, the allow-list and its exports ----------------

def _timed(fam, target, out_dir, export_dir, as_json, run, timing, device: str = "cuda"):
    """The timed sweep of ``fam`` on ``target`` through the pipeline, timed on ``device``."""
    import copy

    from occtune.pipeline import SweepRequest, timed_run

    fam = copy.copy(fam)
    fam.export_dir = export_dir
    req = SweepRequest(family=fam.name, target=target.name, out_dir=out_dir, as_json=as_json, run=run, timing=timing)
    return timed_run(fam, target, fam.configs(), fam.workloads(), req, device=device)


def timed_plan(fam, target, view, device: str = "cuda"):
    """Probe every library backend (printed unless --json), then, once the results are written,
    build the allow-list from them (and export it with --export); print it after the table."""
    from occtune.engine.family import TimedPlan
    from occtune.output import console

    from .backends import availability

    avail = {b: availability(b, device, fam.fp8) for b in fam.backends if b != "triton"}
    if not view.as_json:
        for b, a in avail.items():
            console.print(f"backend {b}: " + ("available" + (f" ({_detail(a.detail)})" if a.detail else "")
                                              if a.ok else a.reason))
    state: dict = {}

    def after_write(path, doc):
        state["doc"] = _allowlist(fam, doc, avail)
        files = _export(state["doc"], fam.export_dir, target.name) if fam.export_dir else {}
        if view.as_json:
            return {"backends": {b: {"available": a.ok, "reason": a.reason, "detail": a.detail}
                                 for b, a in avail.items()}, "allowlist": state["doc"], **files}
        return files

    def after_show(run, view):
        if "doc" in state:
            print_allowlist(state["doc"], target, console, view.show_all)

    assumptions = {"workloads": "DeepSeek-V4 (n, k) x M" if fam.workloads() == fam.profile.workloads()
                   else "from --shapes/--m", "fp8": fam.fp8,
                   "tolerance": "occtune.kernels.fp8_gemm.reference (rel L2 and max-abs <= 2^-7)",
                   "library_inputs": "activation scales column-major, weight-side layouts prepared untimed "
                                     "(backends.py)",
                   "selection": "per workload: occtune.kernels.fp8_gemm.allowlist (the overall winner above "
                                "is the engine's, over configs valid on every workload)"}
    return TimedPlan(assumptions=assumptions, after_write=after_write, after_show=after_show)


def _detail(d: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in d.items() if k != "tried")


def _allowlist(fam, doc, avail) -> dict:
    from .allowlist import build

    missing = {b: a.reason for b, a in avail.items() if not a.ok}
    return build(doc["rows"], fam.safety_key, doc["provenance"], target=doc["target"], missing=missing)


def _export(doc, export_dir, target_name) -> dict:
    """Render both files first, then write each atomically (never a half-written pair)."""
    from pathlib import Path

    from occtune.fsutil import atomic_write_text

    from .allowlist import render_json, render_predicate

    texts = {"allowlist_json_file": (f"fp8_gemm_allowlist_{target_name}.json", render_json(doc)),
             "predicate_file": (f"fp8_gemm_use_triton_{target_name}.py", render_predicate(doc))}
    return {k: str(atomic_write_text(Path(export_dir) / name, text)) for k, (name, text) in texts.items()}


def print_allowlist(doc, target, console, show_all: bool = False) -> None:
    """The winners table: per shape and M, each side's time, TFLOP/s, % of the fp8 peak, the choice
    (the first 10 points and one line for the rest unless ``show_all``)."""
    from rich.table import Table

    from occtune.outputs.display import more, top

    peak = getattr(target, "peak_fp8_dense_flops", None)
    console.print(f"allow-list for {doc['target']} (the fastest; a tie with it, inside the noise, goes to the library)")
    t = Table()
    for col in ("n,k", "M", "triton us", "library us", "library", "TFLOP/s", "% fp8 peak", "choice", "margin"):
        t.add_column(col, justify="left" if col in ("n,k", "library", "choice") else "right")
    shown, rest = top([(key, s, p) for key, s in doc["shapes"].items() for p in s["points"]], show_all=show_all)
    for key, s, p in shown:
        us = p["triton_us"] if p["backend"] == "triton" else p["library_us"]
        tf = 2 * p["m"] * s["n"] * s["k"] / (us * 1e-6) / 1e12 if us else None
        t.add_row(key, str(p["m"]), _f(p["triton_us"]), _f(p["library_us"]), p["library_backend"] or "-",
                  _f(tf, ".1f"), _f(100 * tf * 1e12 / peak if tf and peak else None, ".1f"), p["backend"],
                  "" if p["margin"] is None else f"{p['margin']:+.1%}")
    console.print(t)
    if rest:
        chosen = sum(p["backend"] == "triton" for _, _, p in rest)
        console.print(more(len(rest), "points", f"Triton chosen on {chosen}"))
    sm = doc["summary"]
    console.print(f"Triton chosen on {sm['triton_points']}/{sm['points']} points; allow-list vs always Triton "
                  f"{_f(sm['speedup_vs_always_triton'], '.3f')}x, vs always the library "
                  f"{_f(sm['speedup_vs_always_library'], '.3f')}x (geometric means over {sm['points_with_both']} "
                  f"points where both ran)")
    for b, why in doc["missing_backends"].items():
        console.print(f"missing backend {b}: {why}")


def _f(x, fmt=".2f") -> str:
    return "-" if x is None else format(x, fmt)
