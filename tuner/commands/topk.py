"""`tune topk`: sweep the radix top-k kernel's dynamic LDS budget on a target.

Without a GPU of that target this is the analytic sweep: occupancy from the target profile, tie
capacity from the budget (the uniform-bin estimate, or the measured bound with --scores).
"""

from __future__ import annotations

import click
from rich.table import Table

from tuner import provenance
from tuner.analysis import TopkSweep, select_analytic, topk_rows
from tuner.capacity import MEASURED_LABEL, UNIFORM_LABEL, coarse_bins
from tuner.errors import UserError
from tuner.output import console, emit_json
from tuner.profiles import load_topk_profile
from tuner.results import SCHEMA, results_path, write_results
from tuner.targets import load_target
from tuner.units import parse_size, parse_size_list


def _measured_max_candidates(scores: str, bits: int, k: int) -> tuple[int, dict]:
    from tuner.ties import tie_stats_from_file  # numpy-heavy: import only when asked

    stats = tie_stats_from_file(scores, bits=(bits,), k=k)
    return int(stats.max_candidates[bits]), stats.to_dict()


def build_sweep(profile, budgets, threads, static_lds, bits, required_context, headroom, max_candidates):
    sweep = TopkSweep(
        budgets=tuple(parse_size_list(budgets, "--budgets")) if budgets else profile.budgets,
        threads=threads or profile.threads,
        static_lds=parse_size(static_lds, "--static-lds") if static_lds is not None else profile.static_lds,
        bytes_per_entry=profile.bytes_per_entry,
        bits=bits or profile.coarse_bits,
        required_context=required_context or profile.required_context,
        headroom=headroom if headroom is not None else profile.headroom,
        max_candidates=max_candidates,
    )
    if sweep.threads <= 0:
        raise UserError(f"--threads must be positive, got {sweep.threads}")
    if sweep.headroom < 1:
        raise UserError(f"--headroom must be >= 1 (a safety factor), got {sweep.headroom}")
    return sweep


@click.command("topk")
@click.option("--target", "target_name", required=True, help="Target, e.g. gfx950, gfx942, sm_90.")
@click.option("--budgets", help="Dynamic LDS budgets to sweep, e.g. 32K,40K,48K,128K (default: profile).")
@click.option("--threads", type=int, help="Threads per block (default: profile, 512).")
@click.option("--static-lds", help="Static LDS per block (default: profile, ~7 KiB until measured).")
@click.option("--bits", type=click.Choice(["8", "12"]), help="Coarse-key width (default: profile, 8).")
@click.option("--required-context", type=int, help="Tokens a row must hold (default 1048576).")
@click.option("--headroom", type=float, help="Safety factor on the required context (default 1.25).")
@click.option("--scores", type=click.Path(), help="Score rows (.pt/.npy/.safetensors): use the measured tie bound.")
@click.option("--profile", "profile_path", type=click.Path(), help="Kernel profile (default profiles/topk.yaml).")
@click.option("--out", "out_dir", default="results", show_default=True, help="Results folder.")
@click.option("--no-write", is_flag=True, help="Print only; write no results file.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def command(target_name, budgets, threads, static_lds, bits, required_context, headroom, scores,
            profile_path, out_dir, no_write, as_json):
    """Sweep LDS budgets: occupancy, tie capacity and the winner; writes results/<target>/topk.yaml."""
    target = load_target(target_name)
    profile = load_topk_profile(profile_path)
    nbits = int(bits) if bits else profile.coarse_bits
    max_cand, tie_summary = (None, None)
    if scores:
        max_cand, tie_summary = _measured_max_candidates(scores, nbits, profile.k)
    sweep = build_sweep(profile, budgets, threads, static_lds, nbits, required_context, headroom, max_cand)
    rows = topk_rows(target, sweep)
    winner, why = select_analytic(rows)
    doc = _results_doc(target, profile, sweep, rows, winner, why, scores, tie_summary)
    path = None
    if not no_write:
        path = write_results(results_path(out_dir, target.name, "topk"), doc)
    if as_json:
        emit_json({**doc, "configs": rows, "results_file": str(path) if path else None})
        return
    _print_table(target, sweep, rows, winner, why, path)


def _results_doc(target, profile, sweep, rows, winner, why, scores, tie_summary) -> dict:
    measured = sweep.max_candidates is not None
    return {
        "schema": SCHEMA,
        "family": "topk",
        "target": target.name,
        "timed": False,
        "winner": None if winner is None else {
            "config": {"lds_budget": winner["lds_budget_bytes"], "threads": sweep.threads, "bits": sweep.bits},
            "blocks_per_cu": winner["blocks_per_cu"],
            "limiter": winner["limiter"],
            "why": why,
        },
        "rows": rows,
        "assumptions": {
            "analytic": True,
            "threads": sweep.threads,
            "static_lds_bytes": sweep.static_lds,
            "static_lds_source": profile.static_lds_source,
            "bytes_per_entry": sweep.bytes_per_entry,
            "coarse_bits": sweep.bits,
            "coarse_bins": coarse_bins(sweep.bits),
            "required_context_tokens": sweep.required_context,
            "headroom": sweep.headroom,
            "capacity_bound": "measured" if measured else "uniform",
            "capacity_bound_label": MEASURED_LABEL if measured else UNIFORM_LABEL,
            "scores_file": scores,
            "measured_max_candidates": sweep.max_candidates,
            "tie_stats": tie_summary,
            "unconfirmed_target_parameters": target.unconfirmed(),
            "selection": "highest blocks/CU among budgets that fit and cover the context; ties toward the larger budget",
        },
        "provenance": provenance.collect(target_file=target.path, profile_file=profile.path),
    }


def _print_table(target, sweep, rows, winner, why, path) -> None:
    unit = "CU" if target.is_amd else "SM"
    measured = sweep.max_candidates is not None
    need = (f"{sweep.max_candidates} candidates x {sweep.headroom} headroom" if measured else
            f"{sweep.required_context:,} tokens x {sweep.headroom} headroom")
    table = Table(title=f"tune topk --target {target.name}: {sweep.threads} threads, static LDS "
                        f"{sweep.static_lds} B, {sweep.bits}-bit coarse key; analytic (no GPU timing)",
                  title_justify="left")
    cols = ["budget", "LDS/block", f"blocks/{unit}", "waves/SIMD" if target.is_amd else "warps/SM",
            "limiter", "entries", "longest row" if not measured else "needs", "covers"]
    for c in cols:
        table.add_column(c, justify="right" if c not in ("limiter", "covers") else "left")
    for r in rows:
        win = winner is not None and r is winner
        slots = r["waves_per_simd"] if target.is_amd else r["warps_per_sm"]
        reach = f"{r['max_context_tokens']:,}" if not measured else f"{r['required_entries']:,}"
        table.add_row(
            f"{r['lds_budget_bytes'] // 1024} KiB" + (" *" if win else ""),
            f"{r['lds_per_block_bytes']:,}" if r["fits"] else "-",
            str(r["blocks_per_cu"]) if r["fits"] else "no fit",
            str(slots) if r["fits"] else "-",
            r["limiter"] if r["fits"] else r["reason"],
            f"{r['tie_capacity_entries']:,}", reach,
            "yes" if r["covers_context"] else "no",
            style="bold green" if win else None,
        )
    console.print(table)
    label = MEASURED_LABEL if measured else UNIFORM_LABEL
    console.print(f"capacity: {label}; required: {need}")
    if winner is None:
        console.print(f"[bold red]no winner[/]: {why}")
    else:
        console.print(f"winner (analytic): [bold]{winner['lds_budget_bytes'] // 1024} KiB[/] -> "
                      f"{winner['blocks_per_cu']} block(s) per {unit}. {why}")
    if target.unconfirmed():
        console.print(f"[yellow]unconfirmed target parameters:[/] {', '.join(target.unconfirmed())}")
    if path:
        console.print(f"wrote {path}")
