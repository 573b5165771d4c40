"""`tune rope`: sweep the Triton RoPE kernel's variant x BLOCK_M x num_warps on DeepSeek-V4's shapes.

The verb builds a :class:`occtune.pipeline.SweepRequest` and runs the one pipeline: on the local
GPU's target the timed sweep, results in ``results/<target>/rope.yaml``; on any other target (or
with --analytic) each config is cross-compiled for that target without a GPU and the table shows
what the compiler allotted (registers, LDS) and the occupancy model's verdict, with no winner
(occupancy does not rank RoPE configs), written to ``occtune-results/<target>/rope.yaml``. The
tables and the timed plan below are :class:`RopeFamily`'s hooks.
"""

from __future__ import annotations

import itertools

import click

from occtune.engine.options import from_cli, results_options, sweep_options, timed_options_given
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
    from occtune.engine.family import check_workload
    from occtune.kernels.rope.family import RopeFamily, deepseek_workload

    return check_workload(RopeFamily(), deepseek_workload(T, H, D, head_dim=max(HEAD_DIM, D)), f"--shape {text}")


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
@results_options
@sweep_options
def command(block_m, num_warps, variants, shapes, target_name, analytic, out_dir, no_write, force, as_json,
            show_all, **opts):
    """Sweep BLOCK_M x num_warps (x variant) of the RoPE kernel; writes results/<target>/rope.yaml."""
    from occtune.kernels.rope.family import DEEPSEEK_TOKENS, RopeFamily, deepseek_workload
    from occtune.pipeline import SweepRequest, run_request

    run, timing = from_cli(opts)
    configs = parse_grid(block_m, num_warps, variants)
    workloads = [parse_shape(s) for s in shapes] or [deepseek_workload(t) for t in DEEPSEEK_TOKENS]
    req = SweepRequest(family="rope", target=target_name, analytic=analytic, configs=tuple(configs),
                       workloads=tuple(workloads), out_dir=out_dir, write=not no_write, force=force,
                       as_json=as_json, show_all=show_all, run=run, timing=timing,
                       timed_flags=timed_options_given(click.get_current_context()))
    run_request(req, RopeFamily(workloads))


# --- RopeFamily's hooks: the analytic table and JSON, the timed sweep's plan ----------------------

def _label(target) -> str:
    return ("analytic: resources of each config cross-compiled by Triton for "
            f"{target.name} (no GPU), occupancy from the model; nothing timed")


def flat_rows(rows: list[dict]) -> list[dict]:
    """Analytic rows with the config's keys at the top level and the block's whole LDS."""
    return [{**r["config"], **r, "lds_bytes": r["static_lds_bytes"] + r["dynamic_lds_bytes"]} for r in rows]


def analytic_json(family, result, target) -> dict:
    """What ``tune rope --json`` adds to the analytic results document."""
    return {"analytic": True, "label": _label(target), "resources_workload": family.representative(),
            "rows": flat_rows(result.rows), "unconfirmed_target_parameters": target.unconfirmed()}


def show_analytic(family, result, target, view, path) -> bool:
    from rich.table import Table

    from occtune.output import console
    from occtune.outputs.display import analytic_rest, skipped_lines, top

    wl = family.representative()
    unit = "CU" if target.is_amd else "SM"
    console.print(f"[bold]rope --target {target.name}[/]: {_label(target)}")
    console.print(f"resources read for T={wl['T']} H={wl['H']} D={wl['D']} (head {wl['head_dim']}, {wl['dtype']})")
    t = Table()
    regs = ("VGPRs", "SGPRs") if target.is_amd else ("regs",)
    for c in ("variant", "BLOCK_M", "warps", "threads", *regs, "LDS B", f"blk/{unit}",
              "w/SIMD" if target.is_amd else "w/SM", "occ.", "limiter"):
        t.add_column(c, justify="left" if c in ("variant", "limiter") else "right")
    shown, rest = top(flat_rows(result.rows), show_all=view.show_all, limit=view.limit)
    for r in shown:
        head = [r["variant"], str(r["BLOCK_M"]), str(r["num_warps"])]
        nums = [str(r["vgprs"]), str(r["sgprs"])] if target.is_amd else [str(r["regs"])]
        slots = r["waves_per_simd"] if target.is_amd else r["warps_per_sm"]
        t.add_row(*head, str(r["threads"]), *nums, str(r["lds_bytes"]),
                  str(r["blocks_per_cu"]) if r["fits"] else "no fit", str(slots if r["fits"] else "-"),
                  f"{r['occupancy']:.0%}", r["limiter"] if r["fits"] else "no fit")
    console.print(t)
    if rest:
        console.print(analytic_rest(rest))
    sources = sorted({r["resources_source"] for r in result.rows})
    console.print(f"resources: {', '.join(sources)}")
    for r in shown:
        if r.get("occupancy_note"):
            console.print(f"{_cfg(r)}: {r['occupancy_note']}")
        if not r["fits"]:
            console.print(f"no fit: {_cfg(r)}: {r['reason']}")
    for line in skipped_lines(result.skipped, label=_cfg, show_all=view.show_all):
        console.print(line)
    if target.unconfirmed():
        console.print(f"[yellow]unconfirmed target parameters:[/] {', '.join(target.unconfirmed())}")
    console.print(result.why)
    if path:
        console.print(f"wrote {path}")
    return True


def _cfg(c: dict) -> str:
    return f"{c['variant']} BLOCK_M={c['BLOCK_M']} num_warps={c['num_warps']}"


def timed_plan(family, target):
    """The timed sweep's plan: each config's cross-compiled resources and occupancy on every row
    (two of them in the summary), and what the results assume."""
    from occtune.engine.analytic import occupancy_row
    from occtune.engine.family import TimedPlan, key_of
    from occtune.errors import CompileError
    from occtune.pipeline.timed import first_value

    wl, workloads = family.representative(), family.workloads()
    analytic: dict[str, dict] = {}

    def annotate(config):
        k = key_of(config)
        if k not in analytic:
            try:
                res = family.resources(config, target)
            except CompileError:
                res = None
            row = flat_rows([occupancy_row(target, config, res)])[0] if res is not None else {}
            analytic[k] = {c: row.get(c) for c in ("regs", "vgprs", "sgprs", "lds_bytes", "blocks_per_cu",
                                                    "occupancy") if row.get(c) is not None}
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
    return TimedPlan(annotate=annotate, columns=cols, assumptions=assumptions)
