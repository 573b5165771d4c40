"""`tune topk`: sweep the radix top-k kernel's dynamic LDS budget on a target.

Without a GPU of that target (or with --analytic) this is the analytic sweep
(occtune.engine.analytic through the family): registers and static LDS of the main kernel compiled
for the target (assumed from the profile, loudly, only where no compiler builds for it), occupancy
from the target profile, tie capacity against the worst of the uniform estimate and synthetic rows
at the required context (or the measured bound with --scores), refuted by any overflowed rows of
timed sweeps under --out. On the local GPU's target it is the timed sweep (``_timed_sweep``): budgets x workloads
through the engine, with static LDS and registers read from the built kernel, the occupancy model
cross-checked against the driver's occupancy query, overflowed rows per config, the engine's
selection, and ``topk.yaml`` plus ``topk.h`` written.
"""

from __future__ import annotations

import math

import click
from rich.markup import escape
from rich.table import Table

from occtune.outputs import provenance
from occtune.kernels.topk.analysis import TopkSweep
from occtune.kernels.topk.capacity import MEASURED_LABEL, UNIFORM_LABEL, coarse_bins
from occtune.engine.options import from_cli, reject_timed_options, sweep_options
from occtune.errors import UserError
from occtune.model.occupancy import Resources, occupancy
from occtune.output import console, emit_json
from occtune.kernels.topk import BITS_RULE, BUDGET_RULE, THREADS_RULE
from occtune.kernels.topk.profile import CONTEXT_RULE, HEADROOM_RULE, load_topk_profile
from occtune.outputs.results import SCHEMA, out_folder, results_path, write_results
from occtune.model.targets import load_target
from occtune.validate import POSITIVE_INT_LIST, SIZE_LIST, SIZE_VALUE, Value, ValueList


def _measured_stats(scores: str, bits: int, k: int):
    from occtune.kernels.topk.ties import tie_stats_from_file  # numpy-heavy: import only when asked

    stats = tie_stats_from_file(scores, bits=(bits,), k=k)
    stats.require_finite_data(scores)
    return stats


def _add_overflow_counts(rows: list[dict], stats, bits: int, bytes_per_entry: int) -> None:
    """Measured bound: how many of the file's rows would overflow each budget's candidate list."""
    for r in rows:
        r["rows_overflowing"] = int(stats.overflow_rows(bits, r["config"]["lds_budget"], bytes_per_entry))
        r["rows_measured"] = int(stats.rows)


def build_sweep(profile, budgets, threads, static_lds, bits, required_context, headroom, max_candidates):
    """The sweep from the (already validated) options; an option not given takes the profile's value."""
    def given(value, default):
        return default if value is None else value

    return TopkSweep(budgets=tuple(dict.fromkeys(given(budgets, profile.budgets))),
                     threads=given(threads, profile.threads), static_lds=given(static_lds, profile.static_lds),
                     bytes_per_entry=profile.bytes_per_entry, bits=given(bits, profile.coarse_bits),
                     required_context=given(required_context, profile.required_context),
                     headroom=given(headroom, profile.headroom), max_candidates=max_candidates)


@click.command("topk")
@click.option("--target", "target_name", required=True, help="Target, e.g. gfx950, gfx942, sm_90.")
@click.option("--budgets", type=ValueList(BUDGET_RULE, "32K,40K,48K,128K"),
              help="Dynamic LDS budgets to sweep, e.g. 32K,40K,48K,128K (default: profile).")
@click.option("--threads", type=ValueList(THREADS_RULE, "512,1024"),
              help="Threads per block (default: profile, 512); the timed sweep takes a list, e.g. 512,1024.")
@click.option("--static-lds", type=SIZE_VALUE, help="Static LDS per block (default: the compiled kernel's; the "
                                                    "profile's 7 KiB estimate without a compiler).")
@click.option("--bits", type=Value(BITS_RULE), help="Coarse-key width: 8 or 12 (default: profile).")
@click.option("--required-context", type=Value(CONTEXT_RULE), help="Tokens a row must hold (default 1048576).")
@click.option("--headroom", type=Value(HEADROOM_RULE),
              help="Safety factor (1..1000) on the required context (default 1.25).")
@click.option("--scores", type=click.Path(), help="Score rows (.pt/.npy/.safetensors): use the measured tie bound.")
@click.option("--profile", "profile_path", type=click.Path(), help="Kernel profile (default: the family's profile.yaml).")
@click.option("--out", "out_dir", help="Results folder (default: results/ when timed, occtune-results/ when "
                                        "analytic).")
@click.option("--no-write", is_flag=True, help="Print only; write no results file.")
@click.option("--force", is_flag=True, help="Let an analytic sweep replace timed results.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option("--analytic", is_flag=True, help="The analytic sweep even on the local GPU's target.")
@click.option("--batch", type=POSITIVE_INT_LIST, default="1,8,64,256", show_default=True,
              help="Timed: batch sizes (rows).")
@click.option("--lengths", type=SIZE_LIST, default="8K,64K,128K,1M", show_default=True,
              help="Timed: row lengths (K = 1024).")
@sweep_options
def command(target_name, budgets, threads, static_lds, bits, required_context, headroom, scores,
            profile_path, out_dir, no_write, force, as_json, analytic, batch, lengths, **opts):
    """Sweep LDS budgets: occupancy, tie capacity and the winner; writes results/<target>/topk.yaml."""
    run_opts, timing = from_cli(opts)
    target = load_target(target_name)
    profile = load_topk_profile(profile_path)
    nbits = bits or profile.coarse_bits
    threads_list = list(dict.fromkeys(threads or [profile.threads]))      # order kept, repeats dropped
    max_cand, tie_summary, stats = None, None, None
    if scores:
        stats = _measured_stats(scores, nbits, profile.k)
        max_cand, tie_summary = int(stats.max_candidates[nbits]), stats.to_dict()
    sweep = build_sweep(profile, budgets, threads_list[0], static_lds, nbits, required_context, headroom,
                        max_cand)
    if not analytic:
        from occtune.model.targets import detect

        if detect(target.vendor)["target"] == target.name:
            _timed_sweep(target, profile, sweep, batch, lengths, None if no_write else out_folder(out_dir, True),
                         run_opts, timing, as_json, tie_summary, threads_list)
            return
    reject_timed_options(click.get_current_context(), "--analytic asks for the analytic sweep" if analytic
                         else f"no {target.name} GPU is here, so this sweep is analytic", extra=("batch", "lengths"))
    if len(threads_list) > 1:
        raise UserError(f"--threads {','.join(map(str, threads))}: the analytic sweep compares budgets at one "
                        f"block size (blocks per {'CU' if target.is_amd else 'SM'} are not comparable across "
                        "sizes); give one value, or run on a GPU of this target for the timed sweep, which takes "
                        "several")
    sweep, result = _analytic_sweep(target, profile, sweep, static_lds is not None, out_dir)
    rows, winner, why = result.rows, result.winner, result.why
    if stats is not None and stats.nonfinite_rows:      # say how NaN/inf rows shaped the bound
        why += f"; scores: {stats.nonfinite_note()}"
    if stats is not None:
        _add_overflow_counts(rows, stats, sweep.bits, sweep.bytes_per_entry)
    doc = _results_doc(target, profile, sweep, rows, winner, why, scores, tie_summary)
    path = None
    if winner is not None and not no_write:
        path = write_results(results_path(out_folder(out_dir, False), target.name, "topk"), doc, force=force)
    if as_json:
        emit_json({**doc, "configs": rows, "results_file": str(path) if path else None})
    else:
        _print_table(target, sweep, rows, winner, why, path, doc["assumptions"])
    if winner is None:       # nothing to recommend: the table shows why, the error says so, nothing written
        raise UserError(f"tune topk --target {target.name}: {why}{_other_width_hint(sweep)}; nothing written")


def _analytic_sweep(target, profile, sweep, static_lds_given, out_dir):
    """The family's analytic sweep (occtune.engine.analytic) over the budgets at one width: the
    compiled main kernel's resources per budget, the default capacity bound unless --scores gave
    a measured one, and overflowed rows of timed sweeps under ``out_dir`` (default: results/, where
    timed results go) as refutations."""
    from dataclasses import replace

    from occtune.engine.analytic import analytic_sweep, compile_progress
    from occtune.engine.sweep import default_configs
    from occtune.kernels.topk.analysis import timed_overflows, with_default_bound
    from occtune.kernels.topk.family import TopkFamily

    if sweep.max_candidates is None:
        sweep = with_default_bound(sweep, profile.k)
    sweep = replace(sweep, timed_overflow=timed_overflows(out_folder(out_dir, timed=True), sweep.required_context))
    fam = TopkFamily(budgets=sweep.budgets, threads=(sweep.threads,), bits=(sweep.bits,), k=profile.k, sweep=sweep,
                     static_lds=sweep.static_lds if static_lds_given else None)
    configs = default_configs(fam)
    if target.is_amd:      # clang runs as a process per config: compile them side by side (cached on disk)
        from concurrent.futures import ThreadPoolExecutor, as_completed
        import os

        with compile_progress(f"topk.cuh for {target.name}", len(configs)) as bar, \
                ThreadPoolExecutor(max(1, min(len(configs), os.cpu_count() or 1))) as pool:
            for done in as_completed([pool.submit(_compiled_or_none, fam, c, target) for c in configs]):
                done.result()
                bar.advance()
    result = analytic_sweep(fam, target, configs)
    _require_every_budget(result, target)
    return sweep, result


def _require_every_budget(result, target) -> None:
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


def _compiled_or_none(fam, config, target):
    """Warm the compile cache; a config the compiler refuses is skipped by the sweep (an error)."""
    from occtune.errors import CompileError

    try:
        return fam.resources(config, target)
    except CompileError:
        return None


def _results_doc(target, profile, sweep, rows, winner, why, scores, tie_summary) -> dict:
    measured = sweep.max_candidates is not None
    cap = rows[0] if rows else {}
    sources = list(dict.fromkeys(r["resources_source"] for r in rows))
    return {
        "schema": SCHEMA,
        "family": "topk",
        "target": target.name,
        "timed": False,
        "winner": None if winner is None else {
            "config": dict(winner["config"]),
            "blocks_per_cu": winner["blocks_per_cu"],
            "limiter": winner["limiter"],
            "explanation": why,
        },
        "rows": rows,
        "assumptions": {
            "analytic": True,
            "threads": sweep.threads,
            "kernel": "topk_transform_kernel (the split and cluster kernels of long rows are not in the verdict)",
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
            "scores_file": scores,
            "measured_max_candidates": sweep.max_candidates,
            "tie_stats": tie_summary,
            "other_width": None if measured else _other_width(sweep),
            "unconfirmed_target_parameters": target.unconfirmed(),
            "selection": "highest blocks/CU among budgets that fit and cover the context; ties toward the larger budget",
        },
        "provenance": provenance.collect(target=target.name, target_file=target.path, profile_file=profile.path),
    }


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


def _print_table(target, sweep, rows, winner, why, path, notes) -> None:
    unit = "CU" if target.is_amd else "SM"
    measured = sweep.max_candidates is not None
    table = Table(title=f"tune topk --target {target.name}: {sweep.threads} threads, static LDS "
                        f"{notes['static_lds_bytes']} B, {sweep.bits}-bit coarse key; analytic (no GPU timing)",
                  title_justify="left")
    cols = ["budget", "LDS/block", f"blocks/{unit}", "waves/SIMD" if target.is_amd else "warps/SM",
            "limiter", "entries", "needs" if not measured else "needs (rows over)", "covers"]
    for c in cols:
        table.add_column(c, justify="right" if c not in ("limiter", "covers") else "left")
    for r in rows:
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
    r = rows[0]
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
    kernel's resources and the driver's answer (``checks``), admit by tie capacity."""

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

    def admissible(self, config, workload):
        from occtune.kernels.topk.analysis import capacity_for

        cap = capacity_for(self.sweep, int(config["lds_budget"]))
        return cap.covers_context, ("" if cap.covers_context else
                                    f"tie capacity {cap.entries} entries does not cover the required context")

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


def _timed_sweep(target, profile, sweep, batch, lengths, out_dir, run_opts, timing, as_json, tie_summary,
                 threads_list) -> None:
    from occtune.engine.sweep import SweepHooks, default_configs
    from occtune.kernels.topk.family import TopkFamily
    from occtune.pipeline.timed import Output, run_timed

    workloads = [{"B": b, "L": n, "K": profile.k} for b in batch for n in lengths]
    fam = TopkFamily(budgets=sweep.budgets, threads=tuple(threads_list), bits=(sweep.bits,), k=profile.k)
    chk = _TimedChecks(target, sweep)
    fam.admissible = chk.admissible
    unit = "CU" if target.is_amd else "SM"
    run = run_timed(fam, target=target.name, configs=default_configs(fam), workloads=workloads, device="cuda",
                    timer=timing.timer(), options=run_opts,
                    hooks=SweepHooks(fits=chk.fits, annotate=chk.annotate,
                                     peak_gbps=float(target.peak_hbm_bytes_per_s) / 1e9),
                    output=Output(out_dir=out_dir, as_json=as_json, columns=_timed_columns(unit),
                                  assumptions=lambda: _timed_assumptions(sweep, threads_list, tie_summary, chk.checks),
                                  after_write=_write_header))
    if not as_json:
        chk.warn_disagreements(unit)
    return run
