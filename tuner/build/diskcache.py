"""A small on-disk memo for deterministic, expensive results (compiled resources, tie statistics).

One JSON file per key under ``<cache dir>/<namespace>/``, named by the hash of the key; the cache
dir is ``$OCCTUNE_CACHE_DIR`` or ``~/.cache/occtune`` (:func:`occtune.fsutil.cache_dir`).
The key must hold everything the value depends on (source hash, options, tool version). A file
that cannot be read or parsed is recomputed; a cache that cannot be written is skipped: the value
is still returned, only not remembered.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

from occtune.fsutil import cache_dir


def source_hash(text: str) -> str:
    """Short hash of source text (a cache key's "this code" part)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]


def path_for(namespace: str, key: dict) -> Path:
    return cache_dir() / namespace / f"{key_hash(key)}.json"


def memo(namespace: str, key: dict, compute: Callable[[], dict]) -> dict:
    """``compute()`` once per ``key`` (a JSON-able dict) across processes; its value must be JSON-able."""
    path = path_for(namespace, key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("key") == json.loads(json.dumps(key, default=str)):
            return doc["value"]
    except (OSError, ValueError, AttributeError, KeyError):
        pass            # absent, torn or foreign: recompute
    value = compute()
    _write(path, {"key": key, "value": value})
    return value


def _write(path: Path, doc: dict) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return          # read-only or full disk: the value is still correct, just not remembered
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, sort_keys=True, default=str)
        os.replace(tmp, path)
    except OSError:
        Path(tmp).unlink(missing_ok=True)
