"""The analytic sweep of any family: resources -> occupancy -> family columns -> selection.

No GPU and no timing: each config's per-block resources come from ``family.resources(config,
target)`` (the compiled kernel where a compiler for the target is at hand, else the family's
stated assumption), the occupancy model gives blocks per CU/SM and the limiter, the family adds
its own columns (``analytic_columns``: top-k's tie capacity, say) and picks the winner
(``select_analytic``). Every row says where its resources came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from occtune.engine.family import Family, Resources
from occtune.errors import CompileError
from occtune.occupancy import KernelResources, occupancy


@dataclass
class AnalyticResult:
    family: str
    target: str
    rows: list[dict]
    winner: dict | None
    why: str
    skipped: list[dict] = field(default_factory=list)


def occupancy_row(target, config: dict, res: Resources) -> dict:
    """One config's resources and the occupancy model's verdict on ``target``."""
    occ = occupancy(target, KernelResources(
        threads=res.threads, static_lds=res.static_lds, dynamic_lds=res.dynamic_lds,
        vgprs=res.vgprs or 0, agprs=res.agprs or 0, sgprs=res.sgprs or 0, regs=res.regs or 0))
    return {
        "config": dict(config), "threads": res.threads, "static_lds_bytes": res.static_lds,
        "dynamic_lds_bytes": res.dynamic_lds, "regs": res.regs, "vgprs": res.vgprs, "agprs": res.agprs,
        "sgprs": res.sgprs, "resources_source": res.source, "compiler_occupancy": res.compiler_occupancy,
        "lds_per_block_bytes": occ.lds_per_block, "fits": occ.fits, "reason": occ.reason,
        "blocks_per_cu": occ.blocks_per_cu, "waves_per_simd": occ.waves_per_simd,
        "warps_per_sm": occ.warps_per_sm, "occupancy": round(occ.occupancy, 4), "limiter": occ.limiter,
        "limits": occ.limits,
    }


def analytic_sweep(family: Family, target, configs: list[dict]) -> AnalyticResult:
    """Rows for ``configs`` on ``target`` and the family's analytic winner."""
    rows, skipped = [], []
    for config in configs:
        try:
            res = family.resources(config, target)
        except CompileError as e:
            skipped.append({"config": dict(config), "reason": f"compile failed: {e}"})
            continue
        if res is None:
            skipped.append({"config": dict(config), "reason": f"no resources for {target.name}"})
            continue
        row = occupancy_row(target, config, res)
        row.update(family.analytic_columns(config, target))
        rows.append(row)
    winner, why = family.select_analytic(rows, target)
    return AnalyticResult(family.name, target.name, rows, winner, why, skipped)
