"""The options of one top-k call as a frozen, hashable object: what ``topk(..., **options)``
takes, checked once per new call, and (with the config filled in) the key of its launch plan.

``None`` means "let the launcher choose" for every field that has it: the config
(``lds_budget``, ``threads``, ``bits``: the tuned config of the workload, else the defaults) and
the path (``split``, ``cluster``, ``resident``: see ``occtune.kernels.topk.policy``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from occtune.errors import UserError
from occtune.kernels.topk.policy import PREFIX_MIN_ROW


@dataclass(frozen=True)
class TopkOptions:
    lds_budget: int | None = None     # dynamic LDS bytes: candidate list, and the resident slice
    threads: int | None = None        # threads per block
    bits: int | None = None           # coarse key width (8 or 12)
    page_bits: int = 0                # page-table transform: 2**page_bits positions a page
    prefix_min_row: int = PREFIX_MIN_ROW   # rows at least this long may take the long-row paths
    split: int | None = None          # blocks a long row for the split kernel (None: chosen; 0/1: off)
    cluster: bool | None = None       # the cluster kernel for split rows (sm_90+): None chooses
    resident: bool | int | None = None   # the resident kernel: None chooses, False off, True on,
                                          # an int forces that many blocks a row

    def with_config(self, lds_budget: int, threads: int, bits: int) -> TopkOptions:
        """These options with the config filled in (what a plan is keyed by)."""
        return replace(self, lds_budget=int(lds_budget), threads=int(threads), bits=int(bits))


NAMES = frozenset(f.name for f in fields(TopkOptions))


def options_of(options: TopkOptions | None, config: dict) -> TopkOptions:
    """``options`` (or the defaults) with ``config``'s fields set; an unknown name is a UserError."""
    if options is not None and not isinstance(options, TopkOptions):
        raise UserError(f"options must be a TopkOptions, got {type(options).__name__}")
    bad = sorted(set(config) - NAMES)
    if bad:
        raise UserError(f"topk() got an unknown option {bad[0]!r}; options are {', '.join(sorted(NAMES))}")
    base = options if options is not None else TopkOptions()
    return replace(base, **config) if config else base
