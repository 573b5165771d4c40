"""Tie capacity of the top-k candidate list: how long a row the dynamic LDS budget can handle.

Three bounds, always labelled:
- ``uniform``: the uniform-bin estimate. It assumes the threshold bin holds length / bins of the
  row, so the longest row covered is entries x bins. Known to be optimistic on real logits (about
  77% of real indexer logits share one 8-bit coarse bin: shared/facts/kernels.md).
- ``measured``: the largest threshold-bin population measured on real score rows (``tune ties``,
  ``--scores FILE``).
- the default, :func:`worst_capacity`: the worst of the uniform estimate and the largest
  populations of synthetic row families at the required context (``synthetic:<family>`` names
  the one that binds): an estimate the data does not refute.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

UNIFORM_LABEL = "uniform-bin estimate (assumes the threshold bin holds length/bins; optimistic on real logits)"
MEASURED_LABEL = "measured threshold-bin populations of real score rows"
WORST_LABEL = ("worst of the uniform-bin estimate and synthetic rows at the required context "
               "({families}; {quantile} each)")


def candidate_entries(budget_bytes: int, bytes_per_entry: int = 8) -> int:
    return budget_bytes // bytes_per_entry


def coarse_bins(bits: int) -> int:
    return 1 << bits


@dataclass(frozen=True)
class Capacity:
    bound: str                  # "uniform" | "measured"
    entries: int                # candidate entries the budget holds
    max_context_tokens: int | None   # longest row covered (uniform bound only)
    required_entries: int       # entries needed, headroom included
    covers_context: bool
    label: str


def uniform_capacity(budget_bytes: int, *, bytes_per_entry: int, bits: int,
                     required_context: int, headroom: float) -> Capacity:
    entries = candidate_entries(budget_bytes, bytes_per_entry)
    longest = entries * coarse_bins(bits)
    need_tokens = required_context * headroom
    required_entries = math.ceil(need_tokens / coarse_bins(bits))
    return Capacity("uniform", entries, longest, required_entries, longest >= need_tokens, UNIFORM_LABEL)


def measured_capacity(budget_bytes: int, *, bytes_per_entry: int, max_candidates: int,
                      headroom: float) -> Capacity:
    entries = candidate_entries(budget_bytes, bytes_per_entry)
    required_entries = math.ceil(max_candidates * headroom)
    return Capacity("measured", entries, None, required_entries, entries >= required_entries, MEASURED_LABEL)


def worst_capacity(budget_bytes: int, *, bytes_per_entry: int, bits: int, required_context: int,
                   headroom: float, synthetic: dict[str, int], quantile: str) -> Capacity:
    """The larger requirement of the uniform estimate and each synthetic family's candidates at the
    required context (``{family: candidates}``), headroom applied to both."""
    uni = uniform_capacity(budget_bytes, bytes_per_entry=bytes_per_entry, bits=bits,
                           required_context=required_context, headroom=headroom)
    need = {"uniform": uni.required_entries,
            **{f"synthetic:{fam}": math.ceil(c * headroom) for fam, c in synthetic.items()}}
    bound = max(need, key=need.get)
    label = WORST_LABEL.format(families=", ".join(synthetic), quantile=quantile)
    return Capacity(bound, uni.entries, uni.max_context_tokens if bound == "uniform" else None, need[bound],
                    uni.entries >= need[bound], label)
