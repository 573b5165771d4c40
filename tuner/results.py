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

Timed results (:mod:`occtune.engine.results`) add ``per_workload`` (``[{workload: {...}, winner:
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
from pathlib import Path

import yaml

from occtune.errors import UserError
from occtune.fsutil import atomic_write_yaml

SCHEMA = "occtune.results/2"
SCHEMA_1 = "occtune.results/1"           # read (upgraded on load), never written
REQUIRED = {"schema": str, "family": str, "target": str, "timed": bool, "rows": list, "provenance": dict}


def analytic_document(result, target) -> dict:
    """The results document of an analytic sweep (occtune.engine.analytic.AnalyticResult)."""
    from occtune import provenance

    w = result.winner
    sources = sorted({r["resources_source"] for r in result.rows})
    return {
        "schema": SCHEMA, "family": result.family, "target": target.name, "timed": False,
        "winner": None if w is None else {"config": w["config"], "blocks_per_cu": w["blocks_per_cu"],
                                          "limiter": w["limiter"], "explanation": result.why},
        "rows": result.rows,
        "skipped": result.skipped,
        "assumptions": {"analytic": True, "resources": sources,
                        "unconfirmed_target_parameters": target.unconfirmed()},
        "provenance": provenance.collect(target=target.name, target_file=target.path),
    }


def results_path(out_dir: str | Path, target: str, family: str) -> Path:
    return Path(out_dir) / target / f"{family}.yaml"


def write_results(path: str | Path, doc: dict) -> Path:
    validate(doc, str(path))
    return atomic_write_yaml(path, tidy(doc))


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
    if not isinstance(doc, dict):
        raise UserError(f"{where}: not an occtune results file (expected a mapping)")
    for key, typ in REQUIRED.items():
        if key not in doc:
            raise UserError(f"{where}: missing key '{key}'; is this an occtune results file?")
        if not isinstance(doc[key], typ):
            raise UserError(f"{where}: key '{key}' must be a {typ.__name__}")
    if doc["schema"] != SCHEMA:
        raise UserError(f"{where}: key 'schema' is {doc['schema']!r}; this occtune reads {SCHEMA} and {SCHEMA_1}")
    if "winner" not in doc:
        raise UserError(f"{where}: missing key 'winner'")
    w = doc["winner"]
    if w is not None:
        if not isinstance(w, dict) or not isinstance(w.get("config"), dict):
            raise UserError(f"{where}: key 'winner.config' must be a mapping of parameter -> value")
    return doc


def parse_yaml(text):
    """yaml.safe_load, with libyaml's C parser where PyYAML has it (a timed results file of
    3,000 lines: ~10x faster)."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_results(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"cannot read results file {path}: {getattr(e, 'strerror', None) or e}") from None
    try:
        doc = parse_yaml(text)
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    if isinstance(doc, dict) and doc.get("schema") == SCHEMA_1:
        doc = upgrade(doc)
    return validate(doc, str(path))
