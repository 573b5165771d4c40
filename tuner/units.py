"""Parsing of byte sizes as users type them: 40960, 40K, 40KB, 40KiB (K = 1024)."""

from __future__ import annotations

import re

from occtune.errors import UserError

_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
_SIZE_RE = re.compile(r"^\s*(\d+)\s*([KMG]?)(I?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int, what: str = "size") -> int:
    """Parse a byte size. K, KB and KiB all mean 1024 bytes (GPU memory sizes are binary)."""
    if isinstance(text, bool):
        raise UserError(f"{what}: expected a byte size such as 40960, 40K, 40KB or 40KiB, got {text!r}")
    if isinstance(text, int):
        if text < 0:
            raise UserError(f"{what}: a size cannot be negative ({text})")
        return text
    m = _SIZE_RE.match(str(text))
    if not m:
        raise UserError(f"{what}: cannot read {text!r} as a byte size; write e.g. 40960, 40K, 40KB or 40KiB")
    return int(m.group(1)) * _UNITS[m.group(2).upper()]


def parse_size_list(text: str, what: str = "sizes") -> list[int]:
    """Parse a comma-separated list of sizes, e.g. ``32K,40K,48K,128K``."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise UserError(f"{what}: expected a comma-separated list of sizes such as 32K,40K,48K")
    return [parse_size(t, what) for t in items]


def parse_int_list(text: str, what: str = "values") -> list[int]:
    """Parse a comma-separated list of positive integers, e.g. ``8,16,32``."""
    out = []
    for t in str(text).split(","):
        t = t.strip()
        if not t:
            continue
        if not t.isdigit() or int(t) <= 0:
            raise UserError(f"{what}: {t!r} is not a positive integer; write e.g. 8,16,32")
        out.append(int(t))
    if not out:
        raise UserError(f"{what}: expected a comma-separated list of positive integers")
    return out


def format_size(n: int) -> str:
    """Render bytes compactly: 40960 -> '40 KiB', 7168 -> '7 KiB', 7000 -> '7000 B'."""
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB"
    return f"{n} B"
