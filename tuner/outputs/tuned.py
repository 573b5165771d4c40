"""The tuned config of one workload, read from results files.

One lookup for everything that consumes tuned configs: the families' Python entry points (top-k's
``topk()``, RoPE's ``apply_rope()``) call :func:`tuned_config`, and ``tune export --format json``
writes the same table for serving code to look up the same way.

Where: ``<checkout>/results/<target>/<family>.yaml``, or ``$OCCTUNE_RESULTS/<target>/<family>.yaml``
when that variable is set (an empty folder turns every lookup off); the target is the one of the
device the tensors are on (``sm_90``, ``gfx942``).

The table: a timed results file's ``per_workload`` winners, keyed by the workload dimensions that
vary across them (RoPE: ``T``; top-k: ``B`` and ``L``; dimensions constant across the file are
ignored). A workload takes the entry with the **nearest key**: the smallest sum, over the key
dimensions, of ``|log2(value / key)|`` (the sweeps are geometric: 1, 64, 1024, 8192 ...); ties go
to the larger key; a non-numeric dimension (a dtype) must match exactly. A results file without
per-workload winners (an analytic sweep) gives its one winner to every workload.

A missing results file means no tuned config (the caller falls back to its default config); a file
that is there but cannot be used (unreadable, not YAML, no winner, a config the family rejects) is
a UserError naming it: tuned results never silently turn into the default.
"""

from __future__ import annotations

import functools
import json
import math
import os
from pathlib import Path

from occtune.errors import UserError

RESULTS_ENV = "OCCTUNE_RESULTS"


def results_dir() -> Path:
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "results"


@functools.lru_cache(maxsize=8)
def _target_of(device: str) -> str | None:
    try:
        import torch

        if device.startswith("cpu") or not torch.cuda.is_available():
            return None
        from occtune.model.targets import device_target

        return device_target(torch, device) or None
    except (ImportError, RuntimeError, AssertionError):   # no torch, or a device torch cannot query
        return None


def local_target(device=None) -> str | None:
    """Target name of ``device`` (default: the current GPU): "sm_90" from a CUDA capability,
    "gfx942" from ROCm's gcnArchName; None on a CPU or without a GPU."""
    return _target_of(str(device) if device is not None else "cuda")


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def workload_table(doc: dict) -> tuple[list[str], list[tuple[dict, dict]]]:
    """(key dimensions, [(workload, winning config)]) of a results document; see the module
    docstring. Empty when the document has no winner at all."""
    per = [p for p in doc.get("per_workload") or [] if isinstance(p, dict)
           and isinstance(p.get("workload"), dict) and isinstance(p.get("winner"), dict)]
    if not per:
        win = (doc.get("winner") or {}).get("config")
        return [], ([({}, dict(win))] if isinstance(win, dict) else [])
    entries = [(dict(p["workload"]), dict(p["winner"])) for p in per]
    dims = [d for d in entries[0][0]
            if len({json.dumps(w.get(d), sort_keys=True) for w, _ in entries}) > 1]
    return dims, entries


def key_text(workload: dict, dims: list[str]) -> str:
    """The table key of a workload: its key dimensions' values joined by commas ("*" for none)."""
    return ",".join(str(workload.get(d)) for d in dims) or "*"


def distance(workload: dict, key: dict, dims: list[str]) -> float:
    total = 0.0
    for d in dims:
        a, b = workload.get(d), key.get(d)
        if _is_num(a) and _is_num(b) and a > 0 and b > 0:
            total += abs(math.log2(a / b))
        elif a != b:
            return math.inf
    return total


def nearest(dims: list[str], entries: list[tuple[dict, dict]], workload: dict) -> dict | None:
    """The config of the entry nearest to ``workload`` (None when none matches its non-numeric
    dimensions)."""
    if not entries:
        return None

    def rank(entry):
        key = entry[0]
        return distance(workload, key, dims), tuple(-key[d] for d in dims if _is_num(key.get(d)))

    best = min(entries, key=rank)
    return dict(best[1]) if distance(workload, best[0], dims) < math.inf else None


@functools.lru_cache(maxsize=32)
def _table(path: str, mtime_ns: int):
    from occtune.validate import read_yaml

    doc = read_yaml(path, "tuned results")
    win = (doc.get("winner") or {}) if isinstance(doc, dict) else None
    if not isinstance(win, dict):
        raise UserError(f"{path}: holds no 'winner' mapping; rerun the sweep or delete the file (without it "
                        "the default config is used)")
    dims, entries = workload_table(doc)
    if not entries:
        raise UserError(f"{path}: holds no tuned config (no winner, no per-workload winners); rerun the sweep "
                        "or delete the file")
    return dims, entries, dict(win["config"]) if isinstance(win.get("config"), dict) else None


@functools.lru_cache(maxsize=256)
def _lookup(path: str, mtime_ns: int, workload_json: str | None):
    dims, entries, win = _table(path, mtime_ns)
    if workload_json is None:
        return win
    return nearest(dims, entries, json.loads(workload_json))


def tuned_config(family: str, workload: dict | None = None, *, target: str | None = None, device=None,
                 validate=None) -> dict | None:
    """The tuned config of ``family`` for ``workload`` (None: the overall winner) on ``target``
    (default: the target of ``device``), or None when there is no results file. ``validate(config)``
    returns the config to use or raises a UserError: a file whose config it rejects is reported."""
    target = target if target is not None else local_target(device)
    if not target:
        return None
    path = results_dir() / target / f"{family}.yaml"
    try:
        mtime = path.stat().st_mtime_ns
    except (FileNotFoundError, NotADirectoryError):
        return None
    found = _lookup(str(path), mtime, None if workload is None else json.dumps(workload, sort_keys=True))
    if found is None:
        return None
    try:
        return validate(dict(found)) if validate else dict(found)
    except (UserError, KeyError) as e:          # KeyError: a config without a key the family needs
        raise UserError(f"{path}: its tuned config {found} is not usable ({e}); rerun the sweep or delete "
                        "the file") from None
