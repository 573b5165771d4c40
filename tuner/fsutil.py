"""Atomic file writes: a results file is either the old one or the whole new one, never half.

Files get the mode an ordinary ``open()`` would give them (0666 less the umask: 0644 under the
usual umask 022), not the 0600 of the temporary file, so a build account can read them.

Nothing is written once the user has pressed Ctrl-C: ``tune`` routes SIGINT through
:func:`on_interrupt`, which remembers it, so a KeyboardInterrupt that some library caught and
dropped still stops every later write (and the CLI still exits 130).
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import yaml

from occtune.errors import UserError


INTERRUPTED = threading.Event()     # set once SIGINT arrived in this process (see on_interrupt)
_WRITE_LISTENERS: list = []         # called with (path, text) after each write (occtune.engine.replay notes them)


def cache_dir() -> Path:
    """occtune's cache folder: ``$OCCTUNE_CACHE_DIR``, else ``~/.cache/occtune``."""
    d = os.environ.get("OCCTUNE_CACHE_DIR")
    return Path(d) if d else Path.home() / ".cache" / "occtune"


def listen_to_writes(listener) -> None:
    """Call ``listener(path, text)`` after every successful :func:`atomic_write_text`."""
    if listener not in _WRITE_LISTENERS:
        _WRITE_LISTENERS.append(listener)


def on_interrupt(signum, frame):
    """SIGINT handler: remember the interrupt, then raise KeyboardInterrupt as Python's own does."""
    INTERRUPTED.set()
    raise KeyboardInterrupt


def _stop_if_interrupted() -> None:
    if INTERRUPTED.is_set():
        raise KeyboardInterrupt


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` through a temporary file in the same folder and a rename. A
    failed or interrupted write leaves nothing: no temporary file, no folder it made."""
    path = Path(path)
    _stop_if_interrupted()
    made, tmp = [], None
    try:
        _make_folders(path.parent, made)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        _stop_if_interrupted()
        os.replace(tmp, path)
        for listener in _WRITE_LISTENERS:
            listener(path, text)
    except BaseException as e:    # Ctrl-C included
        _undo(tmp, made)
        if isinstance(e, OSError):
            raise UserError(f"cannot write {path}: {e.strerror or e}; choose a writable location (--out)") from None
        raise
    return path


def _make_folders(folder: Path, made: list) -> None:
    """Create ``folder`` and its missing parents, each listed in ``made`` before it is made (so an
    interrupt between the two still leaves it listed for :func:`_undo`)."""
    missing = []
    while not folder.exists():         # up to the first folder that is there
        missing.append(folder)
        folder = folder.parent
    for d in reversed(missing):
        made.append(d)
        d.mkdir(exist_ok=True)


def _undo(tmp, made: list) -> None:
    """Remove the temporary file and the folders this write made, deepest first, where empty."""
    for p, remove in ([(tmp, os.unlink)] if tmp else []) + [(d, os.rmdir) for d in reversed(made)]:
        try:
            remove(p)
        except OSError:
            pass


def current_umask() -> int:
    """The process umask (read by setting it and putting it back: there is no getter)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# libyaml's emitter where PyYAML has it: the same text as yaml.safe_dump, about 3x faster (a timed
# sweep's results are 100-200 KB of YAML: a second of a cached rerun in pure Python on the H200 machine)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def atomic_write_yaml(path: str | os.PathLike, data) -> Path:
    return atomic_write_text(path, yaml.dump(data, Dumper=_DUMPER, sort_keys=False, default_flow_style=None,
                                             width=100))


def atomic_write_json(path: str | os.PathLike, data) -> Path:
    return atomic_write_text(path, json.dumps(data, indent=2, sort_keys=False) + "\n")
