"""Synthetic score families for tie statistics when no real score dump is at hand.

Each family draws float32 rows; row r of a given seed is always the same whatever the number of
rows or the chunking (each row has its own generator, seeded by ``(seed, r)``). See docs/ties.md.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from occtune.errors import UserError


def _normal(rng, n):
    return rng.standard_normal(n, dtype=np.float32)


def _heavy(rng, n):
    return rng.standard_t(2.0, n).astype(np.float32)


def _low_entropy(rng, n):
    # a standard normal quantised to steps of 0.25: about 30 distinct values per row
    return (np.round(rng.standard_normal(n, dtype=np.float32) * 4.0) / 4.0).astype(np.float32)


def _bf16(rng, n):
    # a standard normal rounded to bf16 (round to nearest even), widened back to float32
    b = rng.standard_normal(n, dtype=np.float32).view(np.uint32)
    b = (b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return b.view(np.float32)


def _relu(rng, n):
    # ReLU of a normal centred at -1: about 84% of the values are exactly 0.0
    return np.maximum(rng.standard_normal(n, dtype=np.float32) - np.float32(1.0), np.float32(0.0))


def _narrow(rng, n):
    # concentrated logits: N(2.25, 0.2) puts ~79% of the values in one 8-bit bin, [2, 2.5)
    return (rng.standard_normal(n, dtype=np.float32) * np.float32(0.2) + np.float32(2.25))


FAMILIES: dict[str, tuple[Callable, str]] = {
    "normal": (_normal, "standard normal N(0, 1)"),
    "heavy-tailed": (_heavy, "Student t, 2 degrees of freedom"),
    "low-entropy": (_low_entropy, "N(0, 1) rounded to multiples of 0.25 (~30 distinct values)"),
    "bf16-rounded": (_bf16, "N(0, 1) rounded to bf16"),
    "relu": (_relu, "max(0, N(-1, 1)): ~84% exact zeros"),
    "narrow": (_narrow, "N(2.25, 0.2): ~79% in the 8-bit bin [2, 2.5), like real indexer logits"),
}


def family_names() -> list[str]:
    return list(FAMILIES)


def parse_families(text: str | None) -> list[str]:
    """'all' or None -> every family; else a comma-separated subset, validated."""
    if text is None or text.strip().lower() == "all":
        return family_names()
    names = [t.strip() for t in text.split(",") if t.strip()]
    bad = [n for n in names if n not in FAMILIES]
    if bad or not names:
        raise UserError(f"--families: unknown family {', '.join(bad) or '(none)'}; choose from "
                        f"{', '.join(FAMILIES)} or 'all'")
    return names


def synthetic_scores(family: str, rows: int, length: int, seed: int = 0,
                     first_row: int = 0) -> np.ndarray:
    """float32 ``[rows, length]`` rows ``first_row .. first_row + rows - 1`` of a family."""
    if family not in FAMILIES:
        raise UserError(f"unknown synthetic family {family!r}; choose from {', '.join(FAMILIES)}")
    if rows < 1 or length < 1:
        raise UserError(f"synthetic scores need rows >= 1 and length >= 1, got {rows} x {length}")
    gen = FAMILIES[family][0]
    out = np.empty((rows, length), dtype=np.float32)
    for i in range(rows):
        out[i] = gen(np.random.default_rng([int(seed), first_row + i]), length)
    return out


# ----------------------------------------------------------------------------- the default tie bound

# The families the default capacity bound takes the worst of (beside the uniform estimate): plain
# normal rows, and real-logit-like rows (~79% of the values in one 8-bit coarse bin; a sglang pull
# request measured ~77% on real indexer logits: shared/facts/kernels.md section 1).
BOUND_FAMILIES = ("normal", "narrow")
# Rows per family. A threshold bin's population is a binomial count, so its spread between rows is
# about sqrt(n): ~72 (1.4%) for the ~5,200 candidates of a 1M-token normal row at 8 bits, less in
# relative terms for larger counts. The largest of 8 rows lies ~1.4 sd above the mean; a
# one-in-a-thousand row ~3.1 sd: ~2.5% more at n = 5,200, far inside a 1.25 headroom. 8 rows of 1M
# tokens per family take ~3 s here, once (cached on disk).
BOUND_ROWS = 8
BOUND_QUANTILE_LABEL = f"max of {BOUND_ROWS} rows"


def bound_candidates(length: int, k: int, bits=(8, 12), families=BOUND_FAMILIES, rows: int = BOUND_ROWS,
                     seed: int = 0) -> dict[str, dict[int, int]]:
    """{family: {bits: largest tie-candidate count}} over ``rows`` synthetic rows of ``length``
    tokens, exactly as the kernel bins them (:func:`occtune.kernels.topk.ties.tie_stats`).
    Cached on disk by the arguments and the code that computes them."""
    from pathlib import Path

    from occtune.build.diskcache import memo, source_hash
    from occtune.kernels.topk import PRECOMPUTED

    here = Path(__file__).parent
    code = source_hash("".join((here / f).read_text(encoding="utf-8") for f in ("synthetic.py", "ties.py")))
    key = {"length": int(length), "k": int(k), "bits": sorted(bits), "families": list(families),
           "rows": int(rows), "seed": int(seed), "code": code}

    def compute():
        from occtune.kernels.topk.ties import tie_stats
        from occtune.output import Progress

        out = {}
        with Progress(True, len(families), f"tie bound: binning {rows} synthetic rows of {length:,} tokens",
                      delay_s=1.0, unit="families", todo="to bin", lines=False, transient=True) as bar:
            for fam in families:
                st = tie_stats(synthetic_scores(fam, rows, length, seed), bits=tuple(bits), k=k)
                out[fam] = {str(b): st.max_candidates[b] for b in bits}
                bar.advance()
        return out

    value = memo("tie-bounds", key, compute, PRECOMPUTED)
    return {fam: {int(b): int(value[fam][str(b)]) for b in sorted(bits)} for fam in families}
