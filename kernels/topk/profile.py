"""The top-k sweep profile (kernels/topk/profile.yaml): typed, validated, unknown keys rejected."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from occtune.errors import UserError
from occtune.kernels.topk import BITS_RULE, BUDGET_RULE, K_RULE, THREADS_RULE
from occtune.validate import POSITIVE, SIZE, TEXT, Rule, load, read_yaml, spec


CONTEXT_RULE = Rule(int, min=1, max=2**40)           # tokens a row must hold
HEADROOM_RULE = Rule(float, min=1, max=1000)          # safety factor on it


@dataclass(frozen=True)
class TopkProfile:
    family: str = spec(Rule(str, choices=("topk",)))
    description: str = spec(Rule(str))
    k: int = spec(K_RULE)
    threads: tuple[int, ...] = spec(Rule(list, items=THREADS_RULE))   # the analytic sweep takes the first
    budgets: tuple[int, ...] = spec(Rule(list, items=BUDGET_RULE))
    coarse_bits: int = spec(BITS_RULE)
    static_lds: int = spec(Rule(SIZE))
    static_lds_source: str = spec(TEXT)
    bytes_per_entry: int = spec(POSITIVE)
    required_context: int = spec(CONTEXT_RULE)   # capacity must cover this context (tokens) ...
    headroom: float = spec(HEADROOM_RULE)        # ... times this safety factor
    path: str = ""


def load_topk_profile(path: str | Path | None = None) -> TopkProfile:
    path = Path(path) if path else Path(__file__).with_name("profile.yaml")
    profile = load(TopkProfile, read_yaml(path, "profile"), str(path), path=str(path))
    for key in ("budgets", "threads"):
        if not getattr(profile, key):
            raise UserError(f"{path}: key {key!r} must list at least one value")
    return replace(profile, budgets=tuple(profile.budgets), threads=tuple(profile.threads),
                   headroom=float(profile.headroom))
