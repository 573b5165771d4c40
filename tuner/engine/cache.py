"""Append-only JSON-lines cache of measured points: resumable, fingerprinted, crash-tolerant.

One file per (family, device): ``<dir>/<family>-<device>.jsonl``. The first line is a header
holding the environment fingerprint (:mod:`occtune.engine.env`); every later line is one measured
point, written and fsync'd as soon as it is measured (the parent process is the only writer).

- A torn last line (a crash mid-write) is cut off on load; earlier points are kept.
- A file recorded under another fingerprint (another device, driver, torch/triton version, or
  kernel source) is refused with the differing fields named; ``fresh=True`` moves it aside to
  ``<name>.<old-hash>.old.jsonl`` and starts a new one. Nothing is ever silently reused.
- The same (config, workload) appearing twice: the last line wins.

Where: ``--cache DIR``, else ``$OCCTUNE_CACHE_DIR``, else ``~/.cache/occtune``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from occtune.engine import replay
from occtune.engine import env
from occtune.engine.family import key_of
from occtune.errors import UserError
from occtune.fsutil import cache_dir

SCHEMA = "occtune-cache/1"


def point_key(config: dict, workload: dict) -> str:
    return key_of(config) + "|" + key_of(workload)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60] or "device"


class PointCache:
    """Load with :meth:`open`; ``get`` cached points, ``append`` new ones (fsync'd)."""

    def __init__(self, path: Path, fingerprint: dict, points: dict[str, dict]):
        self.path = path
        self.fingerprint = fingerprint
        self.hash = env.fp_hash(fingerprint)
        self.points = points

    @classmethod
    def open(cls, fingerprint: dict, directory=None, fresh: bool = False) -> "PointCache":
        directory = Path(directory) if directory else cache_dir()
        name = f"{_slug(fingerprint['family'])}-{_slug(fingerprint['device_name'])}.jsonl"
        path = directory / name
        replay.note_input(path)       # a replay of this run needs this file as the run left it
        if fresh and path.exists():
            _move_aside(path)
        points = _load(path, fingerprint) if path.exists() else {}
        cache = cls(path, fingerprint, points)
        if not path.exists():
            cache._write_line({"schema": SCHEMA, "fp": cache.hash, "fingerprint": fingerprint})
        return cache

    def get(self, config: dict, workload: dict) -> dict | None:
        return self.points.get(point_key(config, workload))

    def append(self, record: dict) -> None:
        record = dict(record, fp=self.hash)
        self.points[point_key(record["config"], record["workload"])] = record
        self._write_line(record)

    def _write_line(self, obj: dict) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(json.dumps(obj, sort_keys=True, separators=(",", ":")) + "\n")
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:
            raise UserError(f"cannot write the cache {self.path}: {e.strerror or e}; "
                            "pass --cache DIR or set OCCTUNE_CACHE_DIR to a writable folder") from None


def _move_aside(path: Path) -> None:
    old_hash = "unknown"
    try:
        with open(path, encoding="utf-8") as f:
            old_hash = json.loads(f.readline()).get("fp", "unknown")
    except (OSError, ValueError):
        pass
    os.replace(path, path.with_name(f"{path.stem}.{old_hash}.old.jsonl"))


def _load(path: Path, fingerprint: dict) -> dict[str, dict]:
    lines = _read_lines_cutting_torn_tail(path)
    if not lines:
        path.unlink()
        return {}
    header = lines[0]
    want = env.fp_hash(fingerprint)
    if header.get("schema") != SCHEMA or "fingerprint" not in header:
        raise UserError(f"{path} is not an occtune cache (no header line); move it away or pass --fresh")
    if header.get("fp") != want:
        changes = "; ".join(env.diff(header["fingerprint"], fingerprint))
        raise UserError(f"the cache {path} was recorded in another environment ({changes}); "
                        "pass --fresh to re-measure (the old file is kept beside it) or --cache DIR")
    points = {}
    for rec in lines[1:]:
        if rec.get("fp") != want:
            raise UserError(f"{path} mixes points of another environment (fp {rec.get('fp')}); pass --fresh")
        points[point_key(rec["config"], rec["workload"])] = rec
    return points


def _read_lines_cutting_torn_tail(path: Path) -> list[dict]:
    """Parse every line; a torn (unparsable, unterminated) last line is truncated away."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        end = data.find(b"\n", pos)
        chunk = data[pos:] if end < 0 else data[pos:end]
        try:
            out.append(json.loads(chunk))
        except ValueError:
            if end < 0 or data[end + 1:].strip() == b"":
                with open(path, "r+b") as f:      # crash mid-write: drop the torn tail
                    f.truncate(pos)
                break
            raise UserError(f"{path}: line {len(out) + 1} is corrupt; move the file away or pass --fresh") from None
        pos = len(data) if end < 0 else end + 1
    if pos >= len(data) and data and not data.endswith(b"\n"):
        with open(path, "ab") as f:              # a complete last line without its newline
            f.write(b"\n")
    return out
