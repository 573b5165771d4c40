"""The analytic sweep of any family: resources -> occupancy -> family columns -> selection.

No GPU and no timing: each config's per-block resources come from ``family.resources(config,
target)`` (the compiled kernel where a compiler for the target is at hand, else the family's
stated assumption), the occupancy model gives blocks per CU/SM and the limiter, the family adds
its own columns (``analytic_columns``: top-k's tie capacity, say) and gives its verdict
(``select_analytic``): a winner where the family's verdict ranks configs (``analytic_ranks``),
else none, with what the rows do show. Every row says where its resources came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from occtune.build.compiled import llvm_major_of
from occtune.engine.family import Family
from occtune.errors import CompileError
from occtune.model.occupancy import Resources, llvm_amd_occupancy, occupancy
from occtune.output import Progress


@dataclass
class AnalyticResult:
    family: str
    target: str
    rows: list[dict]
    winner: dict | None
    why: str
    skipped: list[dict] = field(default_factory=list)
    ranked: bool = True          # False: the family's verdict does not rank configs (no winner by design)


def occupancy_row(target, config: dict, res: Resources) -> dict:
    """One config's resources and the occupancy model's verdict on ``target``; on AMD, beside the
    compiler's own occupancy remark, our reproduction of it (``llvm_model_waves``: the same
    inputs LLVM sees, so it must equal the remark) and why the hardware model differs, if it does."""
    occ = occupancy(target, res)
    row = {
        "config": dict(config), "threads": res.threads, "static_lds_bytes": res.static_lds,
        "dynamic_lds_bytes": res.dynamic_lds, "regs": res.regs, "vgprs": res.vgprs, "agprs": res.agprs,
        "sgprs": res.sgprs, "scratch_bytes": res.scratch_bytes, "resources_source": res.source,
        "compiler_occupancy": res.compiler_occupancy,
        "lds_per_block_bytes": occ.lds_per_block, "fits": occ.fits, "reason": occ.reason,
        "blocks_per_cu": occ.blocks_per_cu, "waves_per_simd": occ.waves_per_simd,
        "warps_per_sm": occ.warps_per_sm, "occupancy": round(occ.occupancy, 4), "limiter": occ.limiter,
        "limits": occ.limits,
    }
    if target.is_amd and res.compiler_occupancy is not None:
        row["llvm_model_waves"] = llvm_model_waves(target, res)
        row["occupancy_note"] = occupancy_note(target, row)
    return row


def llvm_model_waves(target, res: Resources) -> int:
    """:func:`occtune.model.occupancy.llvm_amd_occupancy` on what LLVM sees of this kernel: its static LDS
    (not the dynamic), registers, and the flat workgroup range ``1..threads`` that HIP's
    ``__launch_bounds__`` and Triton both emit, for the LLVM version that compiled it."""
    return llvm_amd_occupancy(target, replace(res, dynamic_lds=0), flat_wg_range=(1, res.threads),
                              llvm_major=llvm_major_of(res.source))


def occupancy_note(target, row: dict) -> str:
    """Why the hardware model's waves per SIMD differ from the compiler's remark ("" if they agree)."""
    hw, llvm = row["waves_per_simd"], row["compiler_occupancy"]
    if not row["fits"] or hw == llvm:
        return ""
    why = []
    if row["dynamic_lds_bytes"]:
        why.append(f"LLVM does not see the {row['dynamic_lds_bytes']:,} B of dynamic LDS")
    waves_per_wg = -(-row["threads"] // target.wave_size)
    why.append(f"whole workgroups: {row['blocks_per_cu']} x {waves_per_wg} waves over {target.simds_per_cu} SIMDs")
    return f"hardware model {hw} waves/SIMD, LLVM {llvm}: " + "; ".join(why)


def compile_progress(what: str, n: int, unit: str = "configs") -> Progress:
    """Progress of compiling ``what`` for ``n`` configs (or targets): a bar on a terminal's stderr
    after a second (a run whose resources are cached or shipped stays silent), gone when done."""
    return Progress(True, n, f"compiling {what}", delay_s=1.0, unit=unit, todo="to compile", lines=False,
                    transient=True)


def analytic_sweep(family: Family, target, configs: list[dict]) -> AnalyticResult:
    """Rows for ``configs`` on ``target`` and the family's analytic verdict."""
    rows, skipped = [], []
    with compile_progress(f"{family.name} for {target.name}", len(configs)) as bar:
        resources = _resources(family, target, configs, bar.advance)
    for config, res in zip(configs, resources):
        if isinstance(res, CompileError):
            skipped.append({"config": dict(config), "reason": f"compile failed: {res}"})
            continue
        if res is None:
            skipped.append({"config": dict(config), "reason": f"no resources for {target.name}"})
            continue
        row = occupancy_row(target, config, res)
        row.update(family.analytic_columns(config, target))
        rows.append(row)
    winner, why = family.select_analytic(rows, target)
    ranked = bool(family.analytic_ranks)
    return AnalyticResult(family.name, target.name, rows, winner if ranked else None, why, skipped, ranked)


def _resources(family: Family, target, configs: list[dict], done=lambda: None) -> list:
    """Each config's resources (None, or the CompileError), on ``family.resources_workers`` threads;
    ``done()`` after each (a progress bar's advance)."""
    def one(config):
        try:
            return family.resources(config, target)
        except CompileError as e:
            return e
        finally:
            done()

    workers = max(1, min(len(configs), int(family.resources_workers(target))))
    if workers == 1:
        return [one(c) for c in configs]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(one, configs))
