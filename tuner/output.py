"""Shared output helpers: one JSON document on stdout for --json, rich tables otherwise."""

from __future__ import annotations

import json
import math
import sys

from rich.console import Console

# Tables go to stdout; progress bars and notes to stderr so --json stays clean. Off a terminal
# (piped, redirected, captured) nothing is wrapped or cut: lines and tables keep their own width, so
# grep and diff see whole lines (rich would otherwise wrap at 80 columns or the width given).
UNWRAPPED = 100_000


def _console() -> Console:
    if sys.stdout.isatty():
        return Console(highlight=False)
    return Console(width=UNWRAPPED, soft_wrap=True, highlight=False)


console = _console()
err_console = Console(stderr=True, highlight=False)


def _clean(obj):
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def emit_json(obj) -> None:
    """Print exactly one JSON document on stdout (NaN/inf become null: JSON has none)."""
    sys.stdout.write(json.dumps(_clean(obj), indent=2) + "\n")
    sys.stdout.flush()
