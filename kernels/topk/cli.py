"""`tune topk`: sweep the radix top-k kernel's dynamic LDS budget on a target.

The verb builds a :class:`occtune.pipeline.SweepRequest` and a :class:`TopkFamily` from its options
and runs the one pipeline. Without a GPU of that target (or with --analytic) this is the analytic
sweep: registers and static LDS of the main kernel compiled for the target (assumed from the
profile, loudly, only where no compiler builds for it), occupancy from the target profile, tie
capacity against the worst of the uniform estimate and synthetic rows at the required context (or
the measured bound with --scores), refuted by any overflowed rows of timed sweeps under --out; the
budgets rank (the most blocks per CU that cover the context wins). On the local GPU's target it is
the timed sweep: budgets x workloads through the engine, with static LDS and registers read from
the built kernel, the occupancy model cross-checked against the driver's occupancy query,
overflowed rows per config, the engine's selection, and ``topk.yaml`` plus ``topk.h`` written.
The functions below the command are :class:`TopkFamily`'s hooks.
"""

from __future__ import annotations

import math

import click
from rich.markup import escape
from rich.table import Table

from occtune.outputs import provenance
from occtune.kernels.topk.analysis import RESIDENT_PATHS, TopkSweep
from occtune.kernels.topk.capacity import MEASURED_LABEL, UNIFORM_LABEL, coarse_bins
from occtune.engine.options import from_cli, results_options, sweep_options, timed_options_given
from occtune.errors import UserError
from occtune.model.occupancy import Resources, occupancy
from occtune.output import console
from occtune.kernels.topk import BITS_RULE, BUDGET_RULE, THREADS_RULE
from occtune.kernels.topk.profile import CONTEXT_RULE, HEADROOM_RULE, load_topk_profile
from occtune.outputs.results import out_folder
from occtune.model.targets import load_target, resolve_target
from occtune.validate import POSITIVE_INT_LIST, SIZE_LIST, SIZE_VALUE, Value, ValueList


def _measured_stats(scores: str, bits: int, k: int):
    from occtune.kernels.topk.ties import tie_stats_from_file  # numpy-heavy: import only when asked

    stats = tie_stats_from_file(scores, bits=(bits,), k=k)
    stats.require_finite_data(scores)
    if stats.short_rows_note():
        click.echo(f"warning: {scores}: {stats.short_rows_note()}", err=True)
    return stats


def build_sweep(profile, budgets, threads, static_lds, bits, required_context, headroom, max_candidates):
    """The sweep from the (already validated) options; an option not given takes the profile's value."""
    def given(value, default):
        return default if value is None else value

    return TopkSweep(budgets=tuple(dict.fromkeys(given(budgets, profile.budgets))),
                     threads=given(threads, profile.threads[0]), static_lds=given(static_lds, profile.static_lds),
                     bytes_per_entry=profile.bytes_per_entry, bits=given(bits, profile.coarse_bits),
                     required_context=given(required_context, profile.required_context),
                     headroom=given(headroom, profile.headroom), max_candidates=max_candidates)


@click.command("topk")
@click.option("--target", "target_name", required=True, help="Target, e.g. gfx950, gfx942, sm_90.")
@click.option("--budgets", type=ValueList(BUDGET_RULE, "32K,40K,48K,128K"),
              help="Dynamic LDS budgets to sweep, e.g. 32K,40K,48K,128K (default: profile).")
@click.option("--threads", type=ValueList(THREADS_RULE, "512,1024"),
              help="Threads per block (default: the profile's 512,1024; the analytic sweep takes one, the first).")
@click.option("--static-lds", type=SIZE_VALUE, help="Static LDS per block (default: the compiled kernel's; the "
                                                    "profile's 7 KiB estimate without a compiler).")
@click.option("--bits", type=Value(BITS_RULE), help="Coarse-key width: 8 or 12 (default: profile).")
@click.option("--required-context", type=Value(CONTEXT_RULE), help="Tokens a row must hold (default 1048576).")
@click.option("--headroom", type=Value(HEADROOM_RULE),
              help="Safety factor (1..1000) on the required context (default 1.25).")
@click.option("--scores", type=click.Path(), help="Score rows (.pt/.npy/.safetensors): use the measured tie bound.")
@click.option("--profile", "profile_path", type=click.Path(), help="Kernel profile (default: the family's profile.yaml).")
@click.option("--analytic", is_flag=True, help="The analytic sweep even on the local GPU's target.")
@click.option("--batch", type=POSITIVE_INT_LIST, default="1,8,64,256", show_default=True,
              help="Timed: batch sizes (rows).")
@click.option("--lengths", type=SIZE_LIST, default="8K,64K,128K,1M", show_default=True,
              help="Timed: row lengths (K = 1024).")
@results_options
@sweep_options
def command(target_name, budgets, threads, static_lds, bits, required_context, headroom, scores,
            profile_path, out_dir, no_write, force, as_json, analytic, batch, lengths, show_all, **opts):
    """Sweep LDS budgets: occupancy, tie capacity and the winner; writes results/<target>/topk.yaml."""
    from occtune.engine.family import check_workload
    from occtune.kernels.topk.family import TopkFamily
    from occtune.pipeline import SweepRequest, run_request

    run_opts, timing = from_cli(opts)
    target = load_target(target_name)
    profile = load_topk_profile(profile_path)
    nbits = bits or profile.coarse_bits
    threads_list = list(dict.fromkeys(threads or profile.threads))      # order kept, repeats dropped
    if not threads and (analytic or not resolve_target(target.name)[1]):
        threads_list = threads_list[:1]     # the analytic verdict compares budgets at one block size
    max_cand, stats = None, None
    if scores:
        stats = _measured_stats(scores, nbits, profile.k)
        max_cand = int(stats.max_candidates[nbits])
    sweep = build_sweep(profile, budgets, threads_list[0], static_lds, nbits, required_context, headroom,
                        max_cand)
    fam = TopkFamily(budgets=sweep.budgets, threads=tuple(threads_list), bits=(sweep.bits,), k=profile.k,
                     sweep=sweep, static_lds=static_lds, profile=profile,
                     scores=(scores, stats) if scores else None, evidence_dir=out_folder(out_dir, timed=True))
    req = SweepRequest(family="topk", target=target.name, analytic=analytic,
                       workloads=tuple(check_workload(fam, {"B": b, "L": n, "K": profile.k}, "--batch/--lengths")
                                       for b in batch for n in lengths),
                       out_dir=out_dir, write=not no_write, force=force, as_json=as_json, show_all=show_all,
                       run=run_opts, timing=timing,
                       timed_flags=timed_options_given(click.get_current_context(), extra=("batch", "lengths")))
    run_request(req, fam)


# ------------------------------------------------------------- TopkFamily's analytic hooks


def check_one_block_size(configs, target) -> None:
    """The analytic verdict compares budgets at one block size: refused before any compile."""
    threads = sorted({int(c["threads"]) for c in configs})
    if len(threads) > 1:
        raise UserError(f"threads {','.join(map(str, threads))}: the analytic sweep compares budgets at one "
                        f"block size (blocks per {'CU' if target.is_amd else 'SM'} are not comparable across "
                        "sizes); give one value, or run on a GPU of this target for the timed sweep, which takes "
                        "several")


def select_analytic(fam, rows, target):
    """The budgets' ranking (analysis.select_analytic), what NaN/inf score rows did to the bound,
    and, when nothing covers the context, what the other key width would need."""
    from occtune.kernels.topk.analysis import select_analytic as rank

    winner, why = rank(rows)
    stats = fam.scores_stats()
    if stats is not None and stats.nonfinite_rows:      # say how NaN/inf rows shaped the bound
        why += f"; scores: {stats.nonfinite_note()}"
    if stats is not None and stats.short_rows_note():
        why += f"; scores: {stats.short_rows_note()}"
    return winner, why + ("" if winner is not None else _other_width_hint(_row_settings(fam, rows)))


def require_every_budget(result, target) -> None:
    """The verdict compares every budget: one the sweep skipped (its compile failed: clang or
    nvcc refused, crashed or timed out) leaves no whole answer, so one error line, nothing written."""
    if not result.skipped:
        return
    from occtune.units import format_size

    budgets = ", ".join(format_size(s["config"]["lds_budget"]) for s in result.skipped)
    reason = (result.skipped[0]["reason"].splitlines() or ["no reason given"])[0]
    raise UserError(f"tune topk --target {target.name}: no resources for {budgets} ({reason}); "
                    "nothing written (failed compiles are not cached: if the compiler crashed or "
                    "timed out, run it again)")


def analytic_document(fam, doc, result, target) -> dict:
    """The analytic results document with what top-k assumed and the profile it read."""
    doc["assumptions"] = _assumptions(target, _row_settings(fam, result.rows), result.rows, fam.scores)
    doc["provenance"] = provenance.collect(target=target.name, target_file=target.path, profile_file=fam.profile.path)
    return doc


def _assumptions(target, sweep, rows, scores) -> dict:
    measured = sweep.max_candidates is not None
    cap = _resources_row(rows)
    sources = list(dict.fromkeys(r["resources_source"] for r in rows if _compiled(r))) or \
        list(dict.fromkeys(r["resources_source"] for r in rows))
    scores_file, stats = scores or (None, None)
    return {
        "analytic": True,
        "threads": sweep.threads,
        "kernel": "topk_transform_kernel (the split and cluster kernels of long rows are not in the verdict)",
        "paths": RESIDENT_PATHS,
        "resources_source": sources[0] if len(sources) == 1 else sources,
        "resources_assumed": any(src.startswith("assumed") for src in sources),
        "static_lds_bytes": cap.get("static_lds_bytes", sweep.static_lds),
        "static_lds_source": sources[0] if len(sources) == 1 else sources,
        "bytes_per_entry": sweep.bytes_per_entry,
        "coarse_bits": sweep.bits,
        "coarse_bins": coarse_bins(sweep.bits),
        "required_context_tokens": sweep.required_context,
        "headroom": sweep.headroom,
        "capacity_bound": "measured" if measured else "worst",
        "capacity_bound_label": MEASURED_LABEL if measured else _capacity_label(sweep),
        "required_entries": cap.get("required_entries"),
        "binding_bound": cap.get("capacity_bound"),
        "synthetic_candidates": None if measured else {f: c[sweep.bits] for f, c in sweep.synthetic.items()},
        "synthetic_quantile": None if measured else sweep.synthetic_quantile,
        "uniform_entries": _uniform_need(sweep),
        "timed_overflow": {f"{b}": ev for (bits, b), ev in (sweep.timed_overflow or {}).items()
                           if bits == sweep.bits},
        "scores_file": scores_file,
        "measured_max_candidates": sweep.max_candidates,
        "tie_stats": None if stats is None else stats.to_dict(),
        "other_width": None if measured else _other_width(sweep),
        "unconfirmed_target_parameters": target.unconfirmed(),
        "selection": "highest blocks/CU among budgets that fit and cover the context; ties toward the larger budget",
    }


def _resources_row(rows: list[dict]) -> dict:
    """The row whose kernel resources the notes quote: the first one compiled (or assumed), not a
    budget too large for the target, which is not compiled (TopkFamily.resources)."""
    return next((r for r in rows if _compiled(r)), rows[0] if rows else {})


def _compiled(row: dict) -> bool:
    from occtune.kernels.topk.family import NOT_COMPILED

    return not row["resources_source"].startswith(NOT_COMPILED)


def _other_width_hint(sweep) -> str:
    other = _other_width(sweep) if sweep.max_candidates is None else None
    if not other or other["budget_bytes"] > max(sweep.budgets):
        return ""
    return (f"; the same bound at {other['bits']} bits needs {other['required_entries']:,} entries "
            f"({other['budget_bytes'] // 1024} KiB): try --bits {other['bits']}")


def _capacity_label(sweep) -> str:
    from occtune.kernels.topk.capacity import WORST_LABEL

    return WORST_LABEL.format(families=", ".join(sweep.synthetic), quantile=sweep.synthetic_quantile)


def _uniform_need(sweep) -> int:
    from occtune.kernels.topk.capacity import uniform_capacity

    return uniform_capacity(0, bytes_per_entry=sweep.bytes_per_entry, bits=sweep.bits,
                            required_context=sweep.required_context, headroom=sweep.headroom).required_entries


def _other_width(sweep) -> dict:
    """What the same bound asks of the other coarse-key width (a hint when nothing covers)."""
    from occtune.kernels.topk.analysis import budget_bytes_for, entries_needed

    other = 12 if sweep.bits == 8 else 8
    need = entries_needed(sweep, other)
    return {"bits": other, "required_entries": need, "budget_bytes": budget_bytes_for(need, sweep.bytes_per_entry)}


def show_analytic(fam, result, target, view, path) -> bool:
    """tune topk's table, one row per budget; False (the generic table) when the rows mix key widths."""
    if len({r["config"]["bits"] for r in result.rows}) > 1:
        return False
    sweep = _row_settings(fam, result.rows)
    _print_table(target, sweep, result, view, path, _assumptions(target, sweep, result.rows, fam.scores))
    return True


def _row_settings(fam, rows):
    """The analytic settings at the rows' block size and key width (``tune sweep topk --set``
    may sweep other values than the family's axes)."""
    from dataclasses import replace

    s = fam.sweep()
    threads, bits = {r["config"]["threads"] for r in rows}, {r["config"]["bits"] for r in rows}
    return replace(s, threads=int(threads.pop()) if len(threads) == 1 else s.threads,
                   bits=int(bits.pop()) if len(bits) == 1 else s.bits)


def _print_resident(target, rows) -> None:
    """The budget as the resident slice (analysis.resident_columns), one row per budget: scores a
    block keeps, the longest row one block finishes, the resident kernel's blocks per CU/SM (its own
    compile) and the rows of 8K/128K/1M the device keeps on chip."""
    def n(v):
        return "?" if v is None else f"{v:,}"
    unit = "CU" if target.is_amd else "SM"
    table = Table(title="the budget as the resident slice (topk_resident_kernel)", title_justify="left")
    for c in ("budget", "slice", "one-block row", f"blocks/{unit}", "rows on chip 8K/128K/1M"):
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(f"{r['config']['lds_budget'] // 1024} KiB", n(r.get("resident_slice_scores")),
                      n(r.get("resident_row_one_block")), n(r.get("resident_blocks_per_cu")),
                      "/".join(n(r.get(f"rows_on_chip_{s}")) for s in ("8k", "128k", "1m")))
    console.print(table)


def _print_table(target, sweep, result, view, path, notes) -> None:
    from occtune.outputs.display import analytic_rest, top

    rows, winner, why = result.rows, result.winner, result.why
    unit = "CU" if target.is_amd else "SM"
    measured = sweep.max_candidates is not None
    console.print(f"tune topk --target {target.name}: {sweep.threads} threads, static LDS "
                  f"{notes['static_lds_bytes']} B, {sweep.bits}-bit coarse key; analytic (no GPU timing)")
    table = Table()
    cols = ["budget", "LDS/block", f"blocks/{unit}", "waves/SIMD" if target.is_amd else "warps/SM",
            "limiter", "entries", "needs" if not measured else "needs (rows over)", "covers"]
    for c in cols:
        table.add_column(c, justify="right" if c not in ("limiter", "covers") else "left")
    shown, rest = top(rows, is_winner=lambda r: r is winner, show_all=view.show_all, limit=view.limit,
                      key=lambda r: (r["fits"] and r["covers_context"], r["blocks_per_cu"], r["config"]["lds_budget"]))
    for r in shown:
        win = winner is not None and r is winner
        slots = r["waves_per_simd"] if target.is_amd else r["warps_per_sm"]
        need = (f"{r['required_entries']:,}" if not measured else
                f"{r['required_entries']:,} ({r['rows_overflowing']}/{r['rows_measured']})")
        table.add_row(
            f"{r['config']['lds_budget'] // 1024} KiB" + (" *" if win else ""),
            f"{r['lds_per_block_bytes']:,}" if r["fits"] else "-",
            str(r["blocks_per_cu"]) if r["fits"] else "no fit",
            str(slots) if r["fits"] else "-",
            r["limiter"] if r["fits"] else r["reason"],
            f"{r['tie_capacity_entries']:,}", need,
            "yes" if r["covers_context"] else ("no (timed)" if r["capacity_bound"] == "timed" else "no"),
            style="bold green" if win else None,
        )
    console.print(table)
    if rest:
        console.print(analytic_rest(rest))
    _print_resident(target, shown)
    console.print(f"paths: {notes['paths']}")
    _print_resources(target, rows, notes)
    _print_capacity(sweep, notes)
    if winner is not None:
        console.print(f"winner (analytic): [bold]{winner['config']['lds_budget'] // 1024} KiB[/] -> "
                      f"{winner['blocks_per_cu']} block(s) per {unit}. {why}")
    if target.unconfirmed():
        console.print(f"[yellow]unconfirmed target parameters:[/] {', '.join(target.unconfirmed())}")
    if path:
        console.print(f"wrote {path}")


def _print_resources(target, rows, notes) -> None:
    """Where the resources came from; loud when they are assumed."""
    if not rows:
        return
    r = _resources_row(rows)
    src = notes["resources_source"]
    if notes["resources_assumed"]:
        console.print(f"[bold yellow]warning: resources assumed, not compiled[/]: {escape(src)}")
        return
    regs = (f"{r['vgprs']} VGPRs, {r['agprs'] or 0} AGPRs, {r['sgprs']} SGPRs" if target.is_amd
            else f"{r['regs']} registers")
    llvm = (f"; LLVM's own occupancy {r['compiler_occupancy']} waves/SIMD (model {r.get('llvm_model_waves')}),"
            " which does not count the dynamic LDS" if r.get("compiler_occupancy") is not None else "")
    console.print(f"resources: {src if isinstance(src, str) else ', '.join(src)}: topk_transform_kernel "
                  f"{regs}, {r['static_lds_bytes']:,} B static LDS{llvm}; the split/cluster kernels of long "
                  "rows are not in this verdict")


def _print_capacity(sweep, notes) -> None:
    if sweep.max_candidates is not None:
        console.print(f"capacity: {MEASURED_LABEL}; required: {sweep.max_candidates} candidates x {sweep.headroom} "
                      f"headroom")
    else:
        fams = ", ".join(f"{f} {c:,}" for f, c in notes["synthetic_candidates"].items())
        console.print(f"capacity: {notes['capacity_bound_label']}; at {sweep.required_context:,} tokens, "
                      f"{sweep.bits}-bit key: uniform {math.ceil(notes['uniform_entries'] / sweep.headroom):,}, "
                      f"{fams} candidates; x{sweep.headroom} headroom -> needs {notes['required_entries']:,} "
                      f"entries ({notes['binding_bound']})")
    for budget, ev in notes["timed_overflow"].items():
        console.print(f"timed evidence: {int(budget) // 1024} KiB: {ev}")


# ----------------------------------------------------------------------------------- timed (GPU)


def _occupancy_check(target, sweep, config: dict) -> dict:
    """Built kernel's static LDS and registers -> the model's blocks/SM, the driver's answer, tie
    capacity. Builds through occtune.build.rtc (cached in-process: free after an in-process sweep)."""
    from occtune.kernels import topk as tk
    from occtune.build import rtc
    from occtune.kernels.topk.analysis import capacity_for
    from occtune.model.occupancy import Resources, occupancy

    budget, threads = int(config["lds_budget"]), int(config["threads"])
    handle = tk.build(budget, threads, int(config["bits"]))
    info = handle.info or {}
    static = info.get("static_smem")
    occ = occupancy(target, Resources(threads=threads, static_lds=static if static is not None else sweep.static_lds,
                                            dynamic_lds=budget, regs=info.get("num_regs") or 0))
    driver = rtc.occupancy_query(handle, threads, budget)
    cap = capacity_for(sweep, budget)
    return {"dynamic_lds_bytes": budget, "static_lds_bytes": static, "regs": info.get("num_regs"),
            "resources_source": "compiler" if static is not None else
            "profile estimate" + (f" ({info['error']})" if info.get("error") else ""),
            "blocks_per_cu": occ.blocks_per_cu, "limiter": occ.limiter, "driver_blocks_per_cu": driver,
            "model_agrees_with_driver": None if driver is None else driver == occ.blocks_per_cu,
            "tie_capacity_entries": cap.entries, "covers_context": cap.covers_context}


class _TimedChecks:
    """The timed sweep's occupancy hooks: prune by the model, annotate each config with the built
    kernel's resources and the driver's answer (``checks``). (Tie capacity admits: TopkFamily.admissible.)"""

    def __init__(self, target, sweep):
        self.target, self.sweep, self.checks = target, sweep, {}

    def fits(self, config):
        occ = occupancy(self.target, Resources(threads=config["threads"], static_lds=self.sweep.static_lds,
                                                     dynamic_lds=config["lds_budget"]))
        return occ.fits, occ.reason

    def annotate(self, config):
        b, t = int(config["lds_budget"]), int(config["threads"])
        if not self.fits(config)[0]:
            return {}
        if (b, t) not in self.checks:
            try:
                self.checks[(b, t)] = {**_occupancy_check(self.target, self.sweep, config), "threads": t}
            except (UserError, RuntimeError) as e:   # a build failure: the sweep's rows already say why
                self.checks[(b, t)] = {"dynamic_lds_bytes": b, "threads": t, "model_agrees_with_driver": None,
                                       "annotate_error": (str(e).splitlines() or [type(e).__name__])[0][:160]}
        return self.checks[(b, t)]

    def warn_disagreements(self, unit: str) -> None:
        for c in self.checks.values():
            if c["model_agrees_with_driver"] is False:
                console.print(f"[yellow]occupancy model and driver disagree[/] at {c['dynamic_lds_bytes']} B, "
                              f"{c.get('threads')} threads: "
                              f"model {c['blocks_per_cu']}, driver {c['driver_blocks_per_cu']} blocks/{unit}")


def _write_header(path, doc) -> dict:
    """After the timed results: the C header of the winner next to them."""
    from occtune.outputs.export import render_header, sources
    from occtune.fsutil import atomic_write_text

    if not doc.get("winner"):
        return {}
    hpath = path.with_suffix(".h")
    atomic_write_text(hpath, render_header(sources([(str(path), doc)])))
    return {"header_file": str(hpath)}


def _timed_columns(unit: str) -> tuple:
    from occtune.pipeline.timed import first_value

    return (("LDS static", lambda rows: first_value(rows, "static_lds_bytes")),
            ("regs", lambda rows: first_value(rows, "regs")),
            (f"blk/{unit} model", lambda rows: first_value(rows, "blocks_per_cu")),
            ("driver", lambda rows: first_value(rows, "driver_blocks_per_cu")),
            ("overflow rows", overflow_text))


def overflow_text(rows) -> str:
    """A config's rows whose threshold bin overflowed the candidate list, then (when any) the
    kernel's other overflow reports (kernels/topk ROW_FLAGS, e.g. "0; spilled 12"): a row finished
    on a slower path is counted, never hidden."""
    from . import ROW_FLAGS

    def total(key):
        return sum(int((r.get("diagnostics") or {}).get(key, 0) or 0) for r in rows)

    extra = [f"{name.removesuffix('_rows')} {n}" for name in ROW_FLAGS if name != "bin_overflow_rows"
             for n in [total(name)] if n]
    return "; ".join([str(total("overflow_rows"))] + extra)


def _timed_assumptions(sweep, threads_list, tie_summary, checks) -> dict:
    measured = sweep.max_candidates is not None
    return {"threads": threads_list[0] if len(threads_list) == 1 else threads_list,
            "coarse_bits": sweep.bits,
            "static_lds_for_pruning": sweep.static_lds,
            "static_lds_source": "the built kernel (cuFuncGetAttribute / hipFuncGetAttribute)",
            "required_context_tokens": sweep.required_context, "headroom": sweep.headroom,
            "capacity_bound_label": MEASURED_LABEL if measured else UNIFORM_LABEL,
            "tie_stats": tie_summary,
            "occupancy_cross_check": [dict(v) for _, v in sorted(checks.items())]}


def timed_plan(fam, target):
    """The timed sweep's plan: prune by the occupancy model, each config's built kernel beside the
    driver's occupancy answer, the summary's columns and assumptions, the C header of the winner
    written beside the results, and a warning wherever model and driver disagree."""
    from occtune.engine.family import TimedPlan

    sweep, threads = fam.settings(), fam.axes()["threads"]
    stats = fam.scores_stats()
    chk = _TimedChecks(target, sweep)
    unit = "CU" if target.is_amd else "SM"
    return TimedPlan(fits=chk.fits, annotate=chk.annotate, columns=_timed_columns(unit),
                     assumptions=lambda: _timed_assumptions(sweep, threads, None if stats is None else stats.to_dict(),
                                                            chk.checks),
                     after_write=_write_header, after_show=lambda run, view: chk.warn_disagreements(unit))
