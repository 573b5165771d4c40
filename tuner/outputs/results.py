"""Results files (results/<target>/<family>.yaml): build, write atomically, load and validate.

One schema for analytic and timed results (``occtune.results/2``)::

    schema: occtune.results/2
    family: topk
    target: gfx950
    timed: false
    winner: {config: {...}, explanation: "...", ...}    # or null when nothing qualifies
    rows: [...]                                          # every point of the sweep
    assumptions: {...}
    provenance: {target, device, arch, driver, runtime, torch, triton, python, occtune,
                 git_revision, date, host, ...}

Timed results (:func:`build_document`) add ``per_workload`` (``[{workload: {...}, winner:
{...}, median_us}]``), ``excluded`` (``[{config: {...}, reason}]``), ``grid`` and ``sweep``.
Configs and workloads are always mappings, never JSON strings. Floats are written to what was
measured: times in microseconds (``*_us``) to 3 decimals (nanoseconds), everything else to 6
significant digits (no float32 noise such as 15.39199985563755).

``occtune.results/1`` files (``winner.why``, ``provenance.device_name``, ``excluded`` keyed by
JSON strings, unrounded floats) are upgraded on load; ``tools/upgrade_results.py`` rewrites them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import yaml

from occtune.engine.family import key_of
from occtune.errors import UserError
from occtune.fsutil import atomic_write_yaml
from occtune.validate import NAME, Rule, check_keys, load, parse_yaml, read_yaml, spec

SCHEMA = "occtune.results/2"
SCHEMA_1 = "occtune.results/1"           # read (upgraded on load), never written
_NUMBER = Rule(float, min=0, nullable=True)
_COUNT = Rule(int, min=0, nullable=True)
_CONFIG_VALUE = Rule((int, float, str, bool))
_ENTRIES = Rule(list, items=Rule(dict))


@dataclass(frozen=True)
class ResultsFile:
    """The top level of a results file; every key is checked, unknown keys are rejected."""

    schema: str = spec(Rule(str, choices=(SCHEMA,), text=f"one of the schemas this occtune reads, {SCHEMA} and "
                                                         f"{SCHEMA_1} (upgraded on load)"))
    family: str = spec(NAME)
    target: str = spec(NAME)
    timed: bool = spec(Rule(bool))
    winner: dict | None = spec(Rule(dict, nullable=True))
    rows: list = spec(_ENTRIES)
    provenance: dict = spec(Rule(dict))
    assumptions: dict | list = spec(Rule((dict, list)), default=None)
    skipped: list = spec(_ENTRIES, default=None)          # analytic: configs with no row, and why
    per_workload: list = spec(_ENTRIES, default=None)     # timed results only, from here on
    excluded: list = spec(_ENTRIES, default=None)
    grid: dict = spec(Rule(dict), default=None)
    sweep: dict = spec(Rule(dict), default=None)


# The row fields that readers (tune report, tune export, occtune.outputs.tuned) use; a row may carry others.
_RESOURCES = {k: _COUNT for k in ("threads", "static_lds", "dynamic_lds", "regs", "vgprs", "agprs", "sgprs")}
ROW_FIELDS = {
    "config": Rule(dict), "workload": Rule(dict), "status": Rule(str), "reason": Rule(str, nullable=True),
    # lds_budget_bytes: the budget column of older top-k files (now config.lds_budget / dynamic_lds_bytes)
    "median_us": _NUMBER, "iqr_us": _NUMBER, "speedup": _NUMBER, "gbps": _NUMBER, "lds_budget_bytes": _COUNT,
    "blocks_per_cu": _COUNT, "fits": Rule(bool), "covers_context": Rule(bool), "resources": Rule(dict, nullable=True),
    **{k: _COUNT for k in ("threads", "static_lds_bytes", "dynamic_lds_bytes", "regs", "vgprs", "agprs", "sgprs")},
}
CONFIG_FIELDS = {"threads": _COUNT}      # a config key readers compute with (the report's occupancy cliff)


def analytic_document(result, target) -> dict:
    """The results document of an analytic sweep (occtune.engine.analytic.AnalyticResult)."""
    from occtune.outputs import provenance

    w = result.winner
    sources = sorted({r["resources_source"] for r in result.rows})
    return {
        "schema": SCHEMA, "family": result.family, "target": target.name, "timed": False,
        "winner": None if w is None else {"config": w["config"], "blocks_per_cu": w["blocks_per_cu"],
                                          "limiter": w["limiter"], "explanation": result.why},
        "rows": result.rows,
        "skipped": result.skipped,
        "assumptions": {"analytic": True, **ranking(result), "resources": sources,
                        "unconfirmed_target_parameters": target.unconfirmed()},
        "provenance": provenance.collect(target=target.name, target_file=target.path),
    }


def ranking(result) -> dict:
    """What an analytic document says of its verdict: ``ranks: false`` and the family's reason
    where occupancy does not rank its configs (no winner, nothing to export; see :func:`unranked`)."""
    return {} if result.ranked else {"ranks": False, "verdict": result.why}


def unranked(doc: dict) -> bool:
    """True for analytic results whose family's verdict does not rank configs (no winner by design)."""
    a = doc.get("assumptions")
    return not doc.get("timed") and isinstance(a, dict) and a.get("ranks") is False


# Where results go unless --out says otherwise. Timed results are measurements, worth keeping and
# committing; analytic ones are recomputed in a second from the profiles, so they go to a folder
# that .gitignore names: the README's main job leaves a clean checkout.
TIMED_DIR = "results"
ANALYTIC_DIR = "occtune-results"


def out_folder(out_dir: str | Path | None, timed: bool) -> str | Path:
    """``out_dir``, or the default folder of timed or analytic results."""
    return out_dir if out_dir else (TIMED_DIR if timed else ANALYTIC_DIR)


def results_path(out_dir: str | Path, target: str, family: str) -> Path:
    return Path(out_dir) / target / f"{family}.yaml"


def write_results(path: str | Path, doc: dict, *, force: bool = False) -> Path:
    """Validate ``doc`` and write it atomically. Analytic results never replace timed ones
    (measurements cannot be recomputed) unless ``force``."""
    validate(doc, str(path))
    if not doc["timed"] and not force:
        keep_timed(Path(path))
    return atomic_write_yaml(path, tidy(doc))


def keep_timed(path: Path) -> None:
    """A UserError if ``path`` holds timed results (an analytic run is about to replace them)."""
    try:
        old = parse_yaml(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, NotADirectoryError):
        return
    except (OSError, UnicodeDecodeError, yaml.YAMLError):      # not results at all: nothing measured to keep
        return
    if isinstance(old, dict) and old.get("timed") is True:
        prov = old.get("provenance") if isinstance(old.get("provenance"), dict) else {}
        what = ", ".join(str(prov[k]) for k in ("device", "date") if prov.get(k)) or "measured"
        raise UserError(f"{path} holds timed results ({what}); an analytic run does not replace them: write "
                        "elsewhere (--out DIR) or pass --force")


def tidy(obj, key: str = ""):
    """``obj`` with floats rounded to what was measured (see the module docstring)."""
    if isinstance(obj, dict):
        return {k: tidy(v, str(k)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [tidy(v, key) for v in obj]
    if isinstance(obj, float) and math.isfinite(obj):
        return round(obj, 3) if key.endswith("_us") else float(f"{obj:.6g}")
    return obj


def upgrade(doc: dict) -> dict:
    """An ``occtune.results/1`` document in the /2 schema (same content, /2 names and shapes)."""
    doc = dict(doc, schema=SCHEMA)
    if isinstance(doc.get("winner"), dict) and "why" in doc["winner"]:
        doc["winner"] = {("explanation" if k == "why" else k): v for k, v in doc["winner"].items()}
    prov = doc.get("provenance")
    if isinstance(prov, dict) and "device_name" in prov:
        doc["provenance"] = {("device" if k == "device_name" else k): v for k, v in prov.items()
                             if not (k == "device" and "device_name" in prov)}
    if isinstance(doc.get("excluded"), dict):
        doc["excluded"] = [{"config": json.loads(k), "reason": v} for k, v in doc["excluded"].items()]
    return tidy(doc)


def validate(doc, where: str) -> dict:
    """``doc`` if it is a well-formed results document, else a UserError naming the key."""
    top = load(ResultsFile, doc, where)
    if top.winner is not None:
        w = check_keys(top.winner, {"config": Rule(dict)}, where, "winner", closed=False)
        _check_config(w["config"], where, "winner.config")
    for i, row in enumerate(top.rows):
        check_keys(row, ROW_FIELDS, where, f"rows[{i}]", required=False, closed=False)
        if row.get("resources"):
            check_keys(row["resources"], _RESOURCES, where, f"rows[{i}].resources", required=False, closed=False)
        if "config" in row:
            _check_config(row["config"], where, f"rows[{i}].config")
    return doc


def _check_config(config: dict, where: str, key: str) -> None:
    """A config: plain parameter names, scalar values, the known ones typed (CONFIG_FIELDS)."""
    for name in config:
        NAME.check(name, f"{where}: a key of '{key}'")
    check_keys(config, {n: CONFIG_FIELDS.get(n, _CONFIG_VALUE) for n in config}, where, key)


def load_results(path: str | Path) -> dict:
    if Path(path).suffix.lower() == ".csv":
        raise UserError(f"{path}: a CSV, not a results file; pass results/<target>/<family>.yaml (tune report "
                        "also reads benchmark CSVs)")
    doc = read_yaml(path, "results file")
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA_1:
        doc = upgrade(doc)
    return validate(doc, str(path))


# ---- the document of a timed sweep: the winner, every row, the grid and provenance --------------
# Raw samples stay in the point cache; rows carry a summary (median, quartiles, IQR, min, max, n).


def _timed_provenance(result, target: str | None) -> dict:
    from occtune.outputs.provenance import collect

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
        "provenance": _timed_provenance(result, target),
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
