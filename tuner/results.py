"""Results files (results/<target>/<family>.yaml): build, write atomically, load and validate.

Layout shared by analytic and timed results::

    schema: occtune.results/1
    family: topk
    target: gfx950
    timed: false
    winner: {config: {...}, ...}    # or null when nothing qualifies
    rows: [...]                     # every point of the sweep
    assumptions: {...}
    provenance: {...}

Timed results (``tuner/engine/results.py``, written through ``tuner/timed.py``) use this same
schema with ``timed: true`` and add ``per_workload``, ``excluded``, ``grid`` and ``sweep``.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from occtune.errors import UserError
from occtune.fsutil import atomic_write_yaml

SCHEMA = "occtune.results/1"
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
    return atomic_write_yaml(path, doc)


def validate(doc, where: str) -> dict:
    if not isinstance(doc, dict):
        raise UserError(f"{where}: not an occtune results file (expected a mapping)")
    for key, typ in REQUIRED.items():
        if key not in doc:
            raise UserError(f"{where}: missing key '{key}'; is this an occtune results file?")
        if not isinstance(doc[key], typ):
            raise UserError(f"{where}: key '{key}' must be a {typ.__name__}")
    if doc["schema"] != SCHEMA:
        raise UserError(f"{where}: key 'schema' is {doc['schema']!r}; this occtune reads {SCHEMA}")
    if "winner" not in doc:
        raise UserError(f"{where}: missing key 'winner'")
    w = doc["winner"]
    if w is not None:
        if not isinstance(w, dict) or not isinstance(w.get("config"), dict):
            raise UserError(f"{where}: key 'winner.config' must be a mapping of parameter -> value")
    return doc


def load_results(path: str | Path) -> dict:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read results file {path}: {e.strerror or e}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    return validate(doc, str(path))
