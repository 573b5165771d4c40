"""A small on-disk memo for deterministic, expensive results (compiled resources, tie statistics).

One JSON file per key under ``<cache dir>/<namespace>/``, named by the hash of the key; the cache
dir is ``$OCCTUNE_CACHE_DIR`` or ``~/.cache/occtune`` (:func:`occtune.fsutil.cache_dir`).
The key must hold everything the value depends on (source hash, options, tool version). A file
that cannot be read or parsed is recomputed; a cache that cannot be written is skipped: the value
is still returned, only not remembered.

A caller may name a *shipped table* (``memo(..., shipped=PATH)``): a JSON file in the package
holding the values of the keys a family's default runs use (every target's compiled resources,
the default tie bound; and a compile's error where it fails), so that a fresh machine does not
compile them. It is read after the disk
cache and before computing, and an entry is used only where its key equals the caller's in
full (source hash, macros, target, compiler version): anything else computes as before.
``tools/precompute.py`` writes the tables, recording the keys the runs use (:func:`recording`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from occtune.errors import CompileError, CompileTimeout
from occtune.fsutil import cache_dir


def source_hash(text: str) -> str:
    """Short hash of source text (a cache key's "this code" part)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def key_hash(key: dict) -> str:
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:32]


def plain(key: dict) -> dict:
    """``key`` as JSON gives it back (tuples become lists): the form stored keys compare against."""
    return json.loads(json.dumps(key, default=str))


def path_for(namespace: str, key: dict) -> Path:
    return cache_dir() / namespace / f"{key_hash(key)}.json"


def memo(namespace: str, key: dict, compute: Callable[[], dict], shipped: Path | None = None) -> dict:
    """``compute()`` once per ``key`` (a JSON-able dict) across processes; its value must be JSON-able.
    ``shipped``: the package's table to read before computing (see the module docstring); a
    :class:`CompileError` it recorded is raised again (failures are not cached on disk)."""
    path = path_for(namespace, key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if doc.get("key") == plain(key):
            return _seen(shipped, namespace, key, {"value": doc["value"]})
    except (OSError, ValueError, AttributeError, KeyError):
        pass            # absent, torn or foreign: recompute
    if shipped is not None and all(rec.read_shipped for rec in _RECORDINGS):
        entry = shipped_entry(shipped, namespace, key)
        if entry is not None:
            return _seen(shipped, namespace, key, entry)
    if shipped is not None and not all(rec.compute for rec in _RECORDINGS):
        raise NotShipped(f"{Path(shipped).name} has no {namespace} entry for {json.dumps(plain(key), sort_keys=True)}")
    try:
        value = compute()
    except CompileTimeout:
        raise               # no verdict: neither cached nor recorded
    except CompileError as e:
        return _seen(shipped, namespace, key, {"error": str(e)})
    _write(path, {"key": key, "value": value})
    return _seen(shipped, namespace, key, {"value": value})


# ------------------------------------------------------------------------------ shipped tables

class NotShipped(LookupError):
    """Under ``recording(compute=False)``: a key a shipped table should hold and does not."""


@functools.lru_cache(maxsize=None)
def _table(path: str) -> dict:
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}       # absent or torn: every key computes, as without a table
    return {(e["namespace"], key_hash(e["key"])): e for e in doc.get("entries", [])}


def shipped_entry(shipped: Path, namespace: str, key: dict) -> dict | None:
    """The table's entry for exactly ``key`` in ``namespace`` ({"value": ...} or {"error": ...}), else None."""
    entry = _table(str(shipped)).get((namespace, key_hash(key)))
    return entry if entry is not None and entry["key"] == plain(key) else None


@dataclass
class Recording:
    """What memo calls naming a shipped table saw: {table: {(namespace, key hash): entry}}, an entry
    holding the key and its value, or the CompileError computing it raised. ``compute=False``: a missing key raises; ``read_shipped=False``: the tables
    are not read (every key not on disk computes)."""

    compute: bool = True
    read_shipped: bool = True
    tables: dict = field(default_factory=dict)

    def add(self, shipped: Path, namespace: str, key: dict, outcome: dict) -> None:
        with _LOCK:
            self.tables.setdefault(Path(shipped), {})[(namespace, key_hash(key))] = \
                {"namespace": namespace, "key": plain(key), **outcome}


_RECORDINGS: list[Recording] = []
_LOCK = threading.Lock()


@contextmanager
def recording(compute: bool = True, read_shipped: bool = True):
    """Record every memo call that names a shipped table (all threads); see :class:`Recording`."""
    rec = Recording(compute, read_shipped)
    _RECORDINGS.append(rec)
    try:
        yield rec
    finally:
        _RECORDINGS.remove(rec)


def _seen(shipped: Path | None, namespace: str, key: dict, outcome: dict) -> dict:
    """Record ``outcome`` ({"value": ...} or {"error": ...}) for the recordings; the value, or the
    CompileError raised again."""
    if shipped is not None:
        for rec in _RECORDINGS:
            rec.add(shipped, namespace, key, outcome)
    if "error" in outcome:
        raise CompileError(outcome["error"])
    return outcome["value"]


def write_table(path: Path, entries: list[dict], about: str) -> bool:
    """Write a shipped table (one entry a line, sorted: small diffs); False if it is unchanged."""
    rows = sorted(json.dumps(e, sort_keys=True) for e in entries)
    text = json.dumps({"about": about})[:-1] + ', "entries": [\n' + ",\n".join(rows) + "\n]}\n"
    if path.is_file() and path.read_text(encoding="utf-8") == text:
        return False
    from occtune.fsutil import atomic_write_text

    atomic_write_text(path, text)
    _table.cache_clear()
    return True


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
