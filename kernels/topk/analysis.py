"""The analytic top-k sweep's own parts: tie capacity per LDS budget, and the analytic winner.

No GPU: resources come from the compiled kernel (:meth:`TopkFamily.resources`), occupancy from
the target profile (:mod:`occtune.engine.analytic` runs the sweep), and the capacity bound from
data: the worst of the uniform estimate and synthetic rows at the required context by default,
the user's score rows with ``--scores``, and overflowed rows of earlier timed sweeps in either
case. Results are marked ``timed: false``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path

from occtune.kernels.topk.capacity import (Capacity, measured_capacity, uniform_capacity,
                                           worst_capacity)


@dataclass(frozen=True)
class TopkSweep:
    budgets: tuple[int, ...]
    threads: int
    static_lds: int
    bytes_per_entry: int
    bits: int
    required_context: int
    headroom: float
    max_candidates: int | None = None     # set: the measured bound (--scores) replaces the default
    synthetic: dict | None = None         # {family: {bits: candidates at the required context}}
    synthetic_quantile: str = ""          # how each family's figure was taken ("max of 8 rows")
    timed_overflow: dict | None = None    # {(bits, budget): evidence} from timed results


def with_default_bound(sweep: TopkSweep, k: int) -> TopkSweep:
    """The sweep with its synthetic families measured at the required context (disk-cached)."""
    from occtune.kernels.topk.synthetic import BOUND_QUANTILE_LABEL, bound_candidates

    return replace(sweep, synthetic=bound_candidates(sweep.required_context, k),
                   synthetic_quantile=BOUND_QUANTILE_LABEL)


def capacity_for(sweep: TopkSweep, budget: int, bits: int | None = None) -> Capacity:
    bits = sweep.bits if bits is None else bits
    if sweep.max_candidates is not None:
        cap = measured_capacity(budget, bytes_per_entry=sweep.bytes_per_entry,
                                max_candidates=sweep.max_candidates, headroom=sweep.headroom)
    elif sweep.synthetic:
        cap = worst_capacity(budget, bytes_per_entry=sweep.bytes_per_entry, bits=bits,
                             required_context=sweep.required_context, headroom=sweep.headroom,
                             synthetic={f: c[bits] for f, c in sweep.synthetic.items()},
                             quantile=sweep.synthetic_quantile)
    else:
        cap = uniform_capacity(budget, bytes_per_entry=sweep.bytes_per_entry, bits=bits,
                               required_context=sweep.required_context, headroom=sweep.headroom)
    evidence = (sweep.timed_overflow or {}).get((bits, budget))
    if evidence and cap.covers_context:
        cap = replace(cap, bound="timed", covers_context=False, label=f"{cap.label}; refuted: {evidence}")
    return cap


def capacity_columns(sweep: TopkSweep, budget: int, bits: int) -> dict:
    cap = capacity_for(sweep, budget, bits)
    return {"tie_capacity_entries": cap.entries,
            "max_context_tokens": cap.max_context_tokens, "required_entries": cap.required_entries,
            "covers_context": cap.covers_context, "capacity_bound": cap.bound,
            "timed_overflow": (sweep.timed_overflow or {}).get((bits, budget))}


def timed_overflows(results_dir, required_context: int) -> dict:
    """{(bits, budget): "N/M rows overflowed at L=... (timed on <target>)"} from the timed top-k
    results under ``results_dir`` (any target: the candidate list holds budget/8 entries on every
    one), counting workloads no longer than the required context."""
    from occtune.errors import UserError
    from occtune.outputs.results import load_results

    found: dict = {}
    for path in sorted(Path(results_dir).glob("*/topk.yaml")):
        try:
            doc = load_results(path)
        except UserError:          # unreadable or not a results file: no evidence, not our error
            continue
        if not doc.get("timed"):
            continue
        tally: dict = {}      # (bits, budget) -> {L: [overflowed rows, rows]}
        for r in doc.get("rows") or []:
            cfg, wl = r.get("config") or {}, r.get("workload") or {}
            if wl.get("L", 0) > required_context or "lds_budget" not in cfg:
                continue
            t = tally.setdefault((int(cfg.get("bits", 8)), int(cfg["lds_budget"])), {}).setdefault(int(wl["L"]), [0, 0])
            t[0] += int(((r.get("diagnostics") or {}).get("overflow_rows")) or 0)
            t[1] += int(wl.get("B", 0))
        for key, per_len in tally.items():
            hits = [f"{o}/{n} rows at L={length:,}" for length, (o, n) in sorted(per_len.items()) if o]
            if hits:
                found.setdefault(key, f"{', '.join(hits)} overflowed (timed on {doc.get('target', path.parent.name)})")
    return found


def exclusion(row: dict) -> str:
    """Why a row cannot win: it does not fit, or its candidate list is too short."""
    if not row["fits"]:
        return row["reason"]
    return (f"does not cover the required context ({row['tie_capacity_entries']:,} entries, needs "
            f"{row['required_entries']:,}: {row['capacity_bound']})")


def select_analytic(rows: list[dict]) -> tuple[dict | None, str]:
    """Highest occupancy among rows that fit and cover the context; ties toward more headroom.
    Without a winner the reason names every budget's exclusion."""
    ok = [r for r in rows if r["fits"] and r["covers_context"]]
    skipped = [f"{r['config']['lds_budget'] // 1024} KiB excluded: {exclusion(r)}" for r in rows if r not in ok]
    if not ok:
        return None, "no budget both fits on the target and covers the required context: " + "; ".join(skipped)
    best = max(ok, key=lambda r: (r["blocks_per_cu"], r["config"]["lds_budget"]))
    tied = [r for r in ok if r["blocks_per_cu"] == best["blocks_per_cu"] and r is not best]
    parts = [f"{best['config']['lds_budget'] // 1024} KiB gives {best['blocks_per_cu']} block(s) per CU/SM, the most among "
             f"budgets that fit and cover the context"]
    if tied:
        parts.append("tied on occupancy with " + ", ".join(f"{r['config']['lds_budget'] // 1024} KiB" for r in tied)
                     + "; the larger budget wins (more candidate headroom)")
    return best, "; ".join(parts + skipped)


def entries_needed(sweep: TopkSweep, bits: int) -> int:
    """Entries the default bound asks for at ``bits`` (the budget does not matter)."""
    return capacity_for(replace(sweep, timed_overflow=None), sweep.bytes_per_entry, bits).required_entries


def budget_bytes_for(entries: int, bytes_per_entry: int) -> int:
    """The smallest budget holding ``entries``, rounded up to 1 KiB."""
    return math.ceil(entries * bytes_per_entry / 1024) * 1024


# Row lengths the resident columns report (the decode regime's: 8K to 1M scores a row).
RESIDENT_ROWS = (8192, 131072, 1 << 20)
RESIDENT_PATHS = ("the verdict (occupancy, tie capacity) is the two-pass kernel's (topk_transform_kernel); the "
                  "resident columns are topk_resident_kernel's (its own compile: slice = the budget); the split "
                  "and cluster kernels of long rows that do not fit on chip are in neither")


def resident_columns(budget: int, units: int, blocks_per_unit: int | None) -> dict:
    """The budget as the resident slice: scores one block keeps on chip, the longest row one block
    finishes alone (with RES_MIN_CAP candidates beside it), and per row length of RESIDENT_ROWS how
    many rows the whole device keeps on chip in one wave (``blocks_per_unit`` resident kernels on
    each of ``units`` CUs/SMs; None: the resident kernel's resources are unknown)."""
    from occtune.kernels.topk import policy

    per = policy.resident_slice(budget)
    one = max(0, (int(budget) - 8 * policy.RES_MIN_CAP) // 4) & ~3
    cols = {"resident_slice_scores": per, "resident_row_one_block": one,
            "resident_blocks_per_cu": blocks_per_unit}
    for L in RESIDENT_ROWS:
        parts = 1 if L <= one else max(2, -(-L // per)) if per else 0    # policy.resident_parts's least
        key = f"rows_on_chip_{L // 1024}k" if L < 1 << 20 else f"rows_on_chip_{L >> 20}m"
        cols[key] = None if blocks_per_unit is None or not parts else units * blocks_per_unit // parts
    return cols
