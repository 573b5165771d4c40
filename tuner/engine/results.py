"""The document of a timed sweep: the winner, every row, the grid and provenance.

Top-level layout shared with analytic results (``occtune.results``, which validates and writes
both): ``schema, family, target, timed, winner{config, ...}, rows, assumptions, provenance``
(+ ``grid``, ``per_workload``, ``excluded``, ``sweep`` here; the schema: :mod:`occtune.results`).
Raw samples stay in the point cache; rows carry a summary (median, quartiles, IQR, min, max, n).
"""

from __future__ import annotations

import json

from occtune.engine.family import key_of
from occtune.provenance import collect
from occtune.results import SCHEMA  # one schema for analytic and timed results (tune export reads both)


def provenance(result, target: str | None) -> dict:
    return collect(target=target, fingerprint=result.fingerprint)


def row_summary(r: dict, speedup: float | None) -> dict:
    out = {"config": r["config"], "workload": r["workload"], "status": r["status"]}
    if r.get("reason"):
        out["reason"] = r["reason"]
    t = r.get("timing")
    if t:
        s = t.get("samples_us") or [t["median_us"]]
        out.update({"median_us": round(t["median_us"], 3), "q1_us": round(t["q1_us"], 3),
                    "q3_us": round(t["q3_us"], 3), "iqr_us": round(t["iqr_us"], 3),
                    "min_us": round(min(s), 3), "max_us": round(max(s), 3), "n_samples": len(s),
                    "method": t.get("method", "")})
    for k in ("gbps", "pct_of_floor", "diagnostics", "resources", "cached"):
        if r.get(k) not in (None, {}, []):
            out[k] = r[k]
    if speedup is not None:
        out["speedup"] = round(speedup, 4)
    extra = {k: v for k, v in r.items() if k not in out and k not in
             ("timing", "wall_s", "fp", "fatal", "reason", "cached", "phases")}
    out.update(extra)          # analytic columns from annotate(): blocks_per_cu, dynamic_lds_bytes ...
    return out


def _speedups(result) -> dict:
    base = {key_of(r["workload"]): r["timing"]["median_us"] for r in result.rows
            if r["status"] == "ok" and r["config"] == result.baseline and r.get("timing")}
    return {(key_of(r["config"]), key_of(r["workload"])): base[key_of(r["workload"])] / r["timing"]["median_us"]
            for r in result.rows if r["status"] == "ok" and r.get("timing") and key_of(r["workload"]) in base}


def build_document(result, selection, target: str | None = None, assumptions: list | dict | None = None) -> dict:
    sp = _speedups(result)
    win = None
    if selection.winner is not None:
        win = {"config": selection.winner, "explanation": selection.explanation,
               **{k: v for k, v in selection.details.items() if k != "winner"}}
    return {
        "schema": SCHEMA, "family": result.family, "target": target, "timed": True,
        "winner": win,
        "per_workload": [dict(p, median_us=round(p["median_us"], 3)) if p.get("median_us") is not None else p
                         for p in selection.per_workload],
        "excluded": [{"config": json.loads(k), "reason": why} for k, why in selection.excluded.items()],
        "grid": {"axes": result.axes, "configs": result.configs, "workloads": result.workloads,
                 "baseline": result.baseline},
        "rows": [row_summary(r, sp.get((key_of(r["config"]), key_of(r["workload"])))) for r in result.rows],
        "assumptions": dict(assumptions) if isinstance(assumptions, dict) else list(assumptions or []),
        "sweep": {"wall_s": round(result.wall_s, 3), "measured": result.n_measured, "cached": result.n_cached,
                  "counts": result.counts(), "cache": result.cache_path, "profile": result.profile()},
        "provenance": provenance(result, target),
    }


def plain(obj):
    """Only YAML-safe types: tuples become lists, str subclasses (TorchVersion) plain str."""
    if isinstance(obj, dict):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    if isinstance(obj, str):
        return str(obj)
    if obj is None or isinstance(obj, (bool, int, float)):
        return obj
    return str(obj)
