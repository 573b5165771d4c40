"""The contract between the engine and a kernel family.

The engine knows nothing of top-k or RoPE: a family is one module under ``kernels/`` that
subclasses :class:`Family` and one sweep profile under ``profiles/``. Families register
themselves by name with :func:`register` and are looked up with :func:`get_family`.

Configs and workloads are plain ``dict``s of JSON-able scalars so that they hash, cache and
serialise without ceremony; :func:`key_of` gives their canonical string form.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

Config = dict      # e.g. {"lds_budget": 40960, "threads": 512, "bits": 8}
Workload = dict    # e.g. {"B": 64, "L": 131072, "K": 2048}


def key_of(d: dict) -> str:
    """Canonical, order-independent string of a config or workload (cache and dedup key)."""
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class Resources:
    """What one compiled config uses per block, as the compiler reports it."""

    threads: int
    static_lds: int = 0
    dynamic_lds: int = 0
    vgprs: int | None = None      # AMD arch VGPRs
    agprs: int | None = None      # AMD accumulation VGPRs
    sgprs: int | None = None      # AMD scalar registers
    regs: int | None = None       # NVIDIA registers per thread
    source: str = "assumed"       # "compiler", "profile", "assumed": where the numbers came from


@dataclass
class CheckResult:
    """Outcome of comparing a config's output with the family's reference."""

    ok: bool
    reason: str = ""
    diagnostics: dict = field(default_factory=dict)   # e.g. {"overflow_rows": 3}


class Family:
    """Base class of a kernel family. Subclasses override what applies to them."""

    name: str = ""

    # --- the space -------------------------------------------------------------------------
    def axes(self) -> dict[str, list]:
        """Parameter axes and the values swept by default, e.g. {"BLOCK_M": [8, 16, 32]}."""
        raise NotImplementedError

    def baseline_config(self) -> Config:
        """The config users would otherwise run (the untuned default): speed-ups are against it."""
        raise NotImplementedError

    def workloads(self) -> list[Workload]:
        raise NotImplementedError

    def is_valid(self, config: Config, workload: Workload) -> tuple[bool, str]:
        """Prune impossible (config, workload) pairs before building. (ok, reason)."""
        return True, ""

    def admissible(self, config: Config, workload: Workload) -> tuple[bool, str]:
        """Hard constraint at selection (capacity, headroom): measured and shown, never chosen if False."""
        return True, ""

    def safety_key(self, config: Config) -> float:
        """Larger is safer (e.g. more candidate headroom); breaks ties inside the noise."""
        return 0.0

    # --- build and resources -----------------------------------------------------------------
    def source_hash(self) -> str:
        """Hash of the kernel source: part of every cache key."""
        raise NotImplementedError

    def build(self, config: Config, device: Any) -> Any:
        """Compile one config for ``device``; returns an opaque handle passed to :meth:`run`."""
        raise NotImplementedError

    def resources(self, built: Any, config: Config) -> Resources | None:
        return None

    # --- run and check -----------------------------------------------------------------------
    def make_inputs(self, workload: Workload, seed: int, device: Any) -> Any:
        raise NotImplementedError

    def adversarial_inputs(self, workload: Workload, device: Any) -> Iterable[tuple[str, Any]]:
        """(name, inputs) pairs that stress correctness (ties, masks, edge lengths)."""
        return ()

    def run(self, built: Any, inputs: Any) -> Any:
        """Launch once (asynchronously); returns the outputs to check."""
        raise NotImplementedError

    def check(self, outputs: Any, inputs: Any, workload: Workload) -> CheckResult:
        raise NotImplementedError

    # --- roofline ----------------------------------------------------------------------------
    def bytes_moved(self, workload: Workload) -> int:
        """The fewest bytes a workload must move through device memory (reads + writes)."""
        raise NotImplementedError

    def flops(self, workload: Workload) -> int:
        return 0


_REGISTRY: dict[str, str] = {
    # family name -> "module:attribute" of a Family subclass or factory
    "topk": "kernels.topk.family:TopkFamily",
    "rope": "kernels.rope.family:RopeFamily",
}
_EXTRA: dict[str, type] = {}


def register(name: str, cls: type) -> None:
    """Register a family class at run time (tests register fault-injecting families)."""
    _EXTRA[name] = cls


def get_family(name: str, **kwargs) -> Family:
    if name in _EXTRA:
        return _EXTRA[name](**kwargs)
    spec = _REGISTRY.get(name)
    if spec is None:
        from tuner.errors import UserError

        known = ", ".join(sorted(set(_REGISTRY) | set(_EXTRA)))
        raise UserError(f"unknown kernel family {name!r}; known: {known}")
    module, attr = spec.split(":")
    return getattr(importlib.import_module(module), attr)(**kwargs)
