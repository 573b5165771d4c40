"""The analytic top-k sweep: occupancy and tie capacity per LDS budget, and the analytic winner.

No GPU: every figure here is computed from the target profile and the kernel profile, and the
results are marked ``timed: false``.
"""

from __future__ import annotations

from dataclasses import dataclass

from occtune.kernels.topk.capacity import Capacity, measured_capacity, uniform_capacity
from occtune.occupancy import KernelResources, occupancy
from occtune.targets import Target


@dataclass(frozen=True)
class TopkSweep:
    budgets: tuple[int, ...]
    threads: int
    static_lds: int
    bytes_per_entry: int
    bits: int
    required_context: int
    headroom: float
    max_candidates: int | None = None     # set: the measured bound is used instead of the uniform one


def capacity_for(sweep: TopkSweep, budget: int) -> Capacity:
    if sweep.max_candidates is not None:
        return measured_capacity(budget, bytes_per_entry=sweep.bytes_per_entry,
                                 max_candidates=sweep.max_candidates, headroom=sweep.headroom)
    return uniform_capacity(budget, bytes_per_entry=sweep.bytes_per_entry, bits=sweep.bits,
                            required_context=sweep.required_context, headroom=sweep.headroom)


def topk_rows(target: Target, sweep: TopkSweep) -> list[dict]:
    rows = []
    for budget in sweep.budgets:
        occ = occupancy(target, KernelResources(threads=sweep.threads, static_lds=sweep.static_lds,
                                                dynamic_lds=budget))
        cap = capacity_for(sweep, budget)
        rows.append({
            "config": {"lds_budget": budget, "threads": sweep.threads, "bits": sweep.bits},
            "threads": sweep.threads,
            "static_lds_bytes": sweep.static_lds,
            "lds_budget_bytes": budget,
            "lds_per_block_bytes": occ.lds_per_block,
            "fits": occ.fits,
            "reason": occ.reason,
            "blocks_per_cu": occ.blocks_per_cu,
            "waves_per_simd": occ.waves_per_simd,
            "warps_per_sm": occ.warps_per_sm,
            "occupancy": round(occ.occupancy, 4),
            "limiter": occ.limiter,
            "limits": occ.limits,
            "tie_capacity_entries": cap.entries,
            "max_context_tokens": cap.max_context_tokens,
            "required_entries": cap.required_entries,
            "covers_context": cap.covers_context,
            "capacity_bound": cap.bound,
        })
    return rows


def select_analytic(rows: list[dict]) -> tuple[dict | None, str]:
    """Highest occupancy among rows that fit and cover the context; ties toward more headroom."""
    ok = [r for r in rows if r["fits"] and r["covers_context"]]
    if not ok:
        why = "no budget both fits on the target and covers the required context with headroom"
        return None, why
    best = max(ok, key=lambda r: (r["blocks_per_cu"], r["lds_budget_bytes"]))
    tied = [r for r in ok if r["blocks_per_cu"] == best["blocks_per_cu"] and r is not best]
    skipped = [r for r in rows if r not in ok]
    parts = [f"{best['lds_budget_bytes'] // 1024} KiB gives {best['blocks_per_cu']} block(s) per CU/SM, the most among "
             f"budgets that fit and cover the context"]
    if tied:
        parts.append("tied on occupancy with " + ", ".join(f"{r['lds_budget_bytes'] // 1024} KiB" for r in tied)
                     + "; the larger budget wins (more candidate headroom)")
    for r in skipped:
        cause = r["reason"] if not r["fits"] else "does not cover the required context"
        parts.append(f"{r['lds_budget_bytes'] // 1024} KiB excluded: {cause}")
    return best, "; ".join(parts)
