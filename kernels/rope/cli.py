"""`tune rope`: sweep the Triton RoPE kernel's variant x BLOCK_M x num_warps on DeepSeek-V4's shapes.

On the local GPU's target: the timed sweep through the engine (tuner/pipeline/timed.py), results in
``<out>/<target>/rope.yaml``. On any other target (or with --analytic): each config is
cross-compiled for that target without a GPU and the table shows what the compiler allotted
(registers, LDS) and the occupancy model's verdict; nothing is timed and nothing is written.
"""

from __future__ import annotations

import itertools

import click

from occtune.engine.options import from_cli, sweep_options
from occtune.errors import UserError
from occtune.kernels.rope.config import BLOCK_M_VALUES, NUM_WARPS_VALUES
from occtune.validate import Rule, ValueList

DEFAULT_VARIANTS = "flat,batched"     # the reported fastest shape and sglang's default; 'all' for every one
HEAD_DIM = 512                        # DeepSeek-V4: rope on the last 64 columns of a 512-wide head


def parse_shape(text: str) -> dict:
    parts = [p.strip() for p in str(text).split(",")]
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise UserError(f"--shape {text!r}: expected three positive integers T,H,D (tokens, heads, rope dim), "
                        f"e.g. --shape 8192,128,64")
    T, H, D = (int(p) for p in parts)
    if D % 2:
        raise UserError(f"--shape {text}: the rope dim D={D} must be even (rotations act on pairs)")
    from occtune.kernels.rope.family import deepseek_workload

    return deepseek_workload(T, H, D, head_dim=max(HEAD_DIM, D))


def parse_grid(bms: list[int], nws: list[int], variants: str) -> list[dict]:
    from occtune.kernels.rope.config import VARIANT_NAMES

    names = list(VARIANT_NAMES) if variants.strip() == "all" else [v.strip() for v in variants.split(",") if v.strip()]
    bad = [v for v in names if v not in VARIANT_NAMES]
    if bad or not names:
        raise UserError(f"--variants {variants!r}: choose from {','.join(VARIANT_NAMES)} (or 'all')")
    return [{"variant": v, "BLOCK_M": b, "num_warps": n} for v, b, n in itertools.product(
        dict.fromkeys(names), dict.fromkeys(bms), dict.fromkeys(nws))]


@click.command("rope")
@click.option("--block-m", type=ValueList(Rule(int, choices=BLOCK_M_VALUES), "8,16,32"), default="8,16,32,64,128",
              show_default=True, help="BLOCK_M values to sweep.")
@click.option("--num-warps", type=ValueList(Rule(int, choices=NUM_WARPS_VALUES), "1,2,4"), default="1,2,4,8",
              show_default=True, help="num_warps values to sweep.")
@click.option("--variants", default=DEFAULT_VARIANTS, show_default=True,
              help="Kernel variants (token,batched,tile,flat,heads) or 'all'.")
@click.option("--shape", "shapes", multiple=True, metavar="T,H,D",
              help="Workload (tokens, heads, rope dim); repeatable. Default: DeepSeek-V4, "
                   "T in 1,64,1024,8192,32768, H=128, D=64, inverse, on a 512-wide head.")
@click.option("--target", "target_name", help="Target (default: the local GPU). Another target: analytic table.")
@click.option("--analytic", is_flag=True, help="Cross-compiled resources and occupancy only, even on the GPU.")
@click.option("--out", "out_dir", default="results", show_default=True, help="Results folder.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@sweep_options
def command(block_m, num_warps, variants, shapes, target_name, analytic, out_dir, as_json, **opts):
    """Sweep BLOCK_M x num_warps (x variant) of the RoPE kernel; writes results/<target>/rope.yaml."""
    from occtune.kernels.rope.family import DEEPSEEK_TOKENS, deepseek_workload
    from occtune.model.targets import resolve_target
    from occtune.engine.options import reject_timed_options

    run, timing = from_cli(opts)
    configs = parse_grid(block_m, num_warps, variants)
    workloads = [parse_shape(s) for s in shapes] or [deepseek_workload(t) for t in DEEPSEEK_TOKENS]
    target, local = resolve_target(target_name, "the analytic table of cross-compiled resources and occupancy")
    if analytic or not local:
        reject_timed_options(click.get_current_context(), f"this run is analytic (cross-compiled for "
                             f"{target.name}, nothing timed or written)", extra=("out_dir",))
        _analytic(target, configs, workloads, as_json)
        return
    _timed(target, configs, workloads, out_dir, run, timing, as_json)


def _representative(workloads: list[dict]) -> dict:
    """The workload whose specialisation the resources are read from: the largest T."""
    return max(workloads, key=lambda w: w["T"])


def analytic_rows(target, configs, workloads) -> tuple[list[dict], list[dict]]:
    """Each valid config cross-compiled for ``target`` and the occupancy model's verdict, through
    the generic analytic sweep; rows carry the config's keys at the top level."""
    from occtune.engine.analytic import analytic_sweep
    from occtune.kernels.rope.family import RopeFamily
    from occtune.pipeline import valid_configs

    family = RopeFamily(workloads)
    valid, skipped = valid_configs(family, configs, workloads)
    result = analytic_sweep(family, target, valid)
    rows = [{**r["config"], **r, "lds_bytes": r["static_lds_bytes"] + r["dynamic_lds_bytes"]} for r in result.rows]
    return rows, skipped + result.skipped


def _analytic(target, configs, workloads, as_json) -> None:
    from occtune.outputs import provenance
    from occtune.output import console, emit_json

    wl = _representative(workloads)
    rows, skipped = analytic_rows(target, configs, workloads)     # with progress after a second
    if not rows:
        raise UserError(f"Triton could not compile the RoPE kernel for {target.name} here "
                        f"({skipped[0]['reason'] if skipped else 'no config'}); is Triton's "
                        f"{'AMD' if target.is_amd else 'NVIDIA'} backend installed?")
    label = ("analytic: resources of each config cross-compiled by Triton for "
             f"{target.name} (no GPU), occupancy from the model; nothing timed")
    if as_json:
        emit_json({"family": "rope", "target": target.name, "timed": False, "analytic": True, "label": label,
                   "resources_workload": wl, "rows": rows, "skipped": skipped,
                   "unconfirmed_target_parameters": target.unconfirmed(),
                   "provenance": provenance.collect(target=target.name, target_file=target.path)})
        return
    _print_analytic(target, rows, skipped, wl, label, console)


def _print_analytic(target, rows, skipped, wl, label, console) -> None:
    from rich.table import Table

    unit = "CU" if target.is_amd else "SM"
    console.print(f"[bold]tune rope --target {target.name}[/]: {label}")
    console.print(f"resources read for T={wl['T']} H={wl['H']} D={wl['D']} (head {wl['head_dim']}, {wl['dtype']})")
    t = Table()
    regs = ("VGPRs", "SGPRs") if target.is_amd else ("regs",)
    for c in ("variant", "BLOCK_M", "warps", "threads", *regs, "LDS B", f"blk/{unit}",
              "w/SIMD" if target.is_amd else "w/SM", "occ.", "limiter"):
        t.add_column(c, justify="left" if c in ("variant", "limiter") else "right")
    for r in rows:
        head = [r["variant"], str(r["BLOCK_M"]), str(r["num_warps"])]
        nums = [str(r["vgprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        slots = r["waves_per_simd"] if target.is_amd else r["warps_per_sm"]
        t.add_row(*head, str(r["threads"]), *nums, str(r["lds_bytes"]),
                  str(r["blocks_per_cu"]) if r["fits"] else "no fit", str(slots if r["fits"] else "-"),
                  f"{r['occupancy']:.0%}", r["limiter"] if r["fits"] else "no fit")
    console.print(t)
    sources = sorted({r["resources_source"] for r in rows})
    console.print(f"resources: {', '.join(sources)}")
    for r in rows:
        if r.get("occupancy_note"):
            console.print(f"{r['variant']} BLOCK_M={r['BLOCK_M']} num_warps={r['num_warps']}: {r['occupancy_note']}")
    for r in rows:
        if not r["fits"]:
            console.print(f"no fit: {r['variant']} BLOCK_M={r['BLOCK_M']} num_warps={r['num_warps']}: {r['reason']}")
    for s in skipped:
        c = s["config"]
        console.print(f"skipped {c['variant']} BLOCK_M={c['BLOCK_M']} num_warps={c['num_warps']}: {s['reason']}")
    if target.unconfirmed():
        console.print(f"[yellow]unconfirmed target parameters:[/] {', '.join(target.unconfirmed())}")


def _timed(target, configs, workloads, out_dir, run, timing, as_json) -> None:
    from occtune.engine.family import key_of
    from occtune.engine.sweep import SweepHooks
    from occtune.kernels.rope.family import RopeFamily
    from occtune.pipeline.timed import Output, first_value, run_timed

    fam = RopeFamily(workloads)
    wl = _representative(workloads)
    analytic: dict[str, dict] = {}

    def annotate(config):
        k = key_of(config)
        if k not in analytic:
            rows, _ = analytic_rows(target, [config], workloads)
            analytic[k] = {c: rows[0].get(c) for c in ("regs", "vgprs", "sgprs", "lds_bytes", "blocks_per_cu",
                                                        "occupancy") if rows and rows[0].get(c) is not None}
        return analytic[k]

    unit = "CU" if target.is_amd else "SM"
    cols = ((f"blocks/{unit}", lambda rows: first_value(rows, "blocks_per_cu")),
            ("VGPRs" if target.is_amd else "regs",
             lambda rows: first_value(rows, "vgprs" if target.is_amd else "regs")))
    assumptions = {"resources": f"cross-compiled by Triton for {target.name} at T={wl['T']} "
                                f"(the launcher's specialisation); occupancy from tuner/model/occupancy.py",
                   "peak_hbm_bytes_per_s": target.peak_hbm_bytes_per_s,
                   "workloads": "DeepSeek-V4 inverse rope, bf16, 64 rope columns of a 512-wide head"
                   if all(w["D"] == 64 and w["H"] == 128 for w in workloads) else "from --shape"}
    run_timed(fam, target=target.name, configs=configs, workloads=workloads, device="cuda", timer=timing.timer(),
              options=run, hooks=SweepHooks(annotate=annotate, peak_gbps=float(target.peak_hbm_bytes_per_s) / 1e9),
              output=Output(out_dir=out_dir, as_json=as_json, columns=cols, assumptions=assumptions))
