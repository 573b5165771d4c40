"""The top-k sweep profile (kernels/topk/profile.yaml): typed, validated, unknown keys rejected."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from occtune.errors import UserError
from occtune.units import parse_size


@dataclass(frozen=True)
class TopkProfile:
    k: int
    threads: int
    budgets: tuple[int, ...]
    coarse_bits: int
    static_lds: int
    static_lds_source: str
    bytes_per_entry: int
    required_context: int
    headroom: float
    path: str = ""


_TOPK_KEYS = {
    "family": str, "description": str, "k": int, "threads": int, "budgets": list,
    "coarse_bits": int, "static_lds": (int, str), "static_lds_source": str,
    "bytes_per_entry": int, "required_context": int, "headroom": (int, float),
}


def _read_yaml(path: Path):
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read profile {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None


def load_topk_profile(path: str | Path | None = None) -> TopkProfile:
    path = Path(path) if path else Path(__file__).with_name("profile.yaml")
    data = _read_yaml(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of profile keys")
    for key, typ in _TOPK_KEYS.items():
        if key not in data:
            raise UserError(f"{path}: missing key '{key}'")
        val = data[key]
        if isinstance(val, bool) or not isinstance(val, typ):
            raise UserError(f"{path}: key '{key}' has the wrong type ({val!r})")
    for key in data:
        if key not in _TOPK_KEYS:
            raise UserError(f"{path}: unknown key '{key}'")
    if data["family"] != "topk":
        raise UserError(f"{path}: key 'family' must be 'topk'")
    if data["coarse_bits"] not in (8, 12):
        raise UserError(f"{path}: key 'coarse_bits' must be 8 or 12")
    for key in ("k", "threads", "bytes_per_entry", "required_context"):
        if data[key] <= 0:
            raise UserError(f"{path}: key '{key}' must be positive")
    if data["headroom"] < 1:
        raise UserError(f"{path}: key 'headroom' must be >= 1")
    budgets = tuple(parse_size(b, f"{path}: key 'budgets'") for b in data["budgets"])
    if not budgets:
        raise UserError(f"{path}: key 'budgets' must list at least one budget")
    return TopkProfile(
        k=data["k"], threads=data["threads"], budgets=budgets, coarse_bits=data["coarse_bits"],
        static_lds=parse_size(data["static_lds"], f"{path}: key 'static_lds'"),
        static_lds_source=data["static_lds_source"], bytes_per_entry=data["bytes_per_entry"],
        required_context=data["required_context"], headroom=float(data["headroom"]), path=str(path),
    )
