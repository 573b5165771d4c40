"""RoPE launch configs: the default, validation, and the tuned config of the local device.

A config is a plain dict ``{"variant": str, "BLOCK_M": int, "num_warps": int}``.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

from occtune.errors import UserError

VARIANT_NAMES = ("token", "batched", "tile", "flat", "heads")
BLOCK_M_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
NUM_WARPS_VALUES = (1, 2, 4, 8, 16)

# sglang's untuned default (the batched kernel, 32 tokens per program, 4 warps).
BASELINE_CONFIG = {"variant": "batched", "BLOCK_M": 32, "num_warps": 4}

# Used when no tuned config exists. The flat kernel over token*heads rows, 16 rows and one warp
# per program, is the shape reported at 4.5-4.6 TB/s of a 5.37 TB/s copy on MI355X
# (shared/facts/kernels.md section 2); H200 measurements replace it through results/.
DEFAULT_CONFIG = {"variant": "flat", "BLOCK_M": 16, "num_warps": 1}

# Where tuned results live: <repo>/results, or $OCCTUNE_RESULTS when set.
RESULTS_ENV = "OCCTUNE_RESULTS"


def default_config() -> dict:
    return dict(DEFAULT_CONFIG)


def validate_config(config) -> dict:
    """Return a clean copy of ``config`` or raise UserError naming the bad key."""
    if not isinstance(config, dict):
        raise UserError(f"rope config must be a dict with variant, BLOCK_M, num_warps; got {config!r}")
    unknown = set(config) - {"variant", "BLOCK_M", "num_warps"}
    if unknown:
        raise UserError(f"rope config has unknown keys {sorted(unknown)}; allowed: variant, BLOCK_M, num_warps")
    out = {**DEFAULT_CONFIG, **config}
    if out["variant"] not in VARIANT_NAMES:
        raise UserError(f"rope variant {out['variant']!r} is unknown; choose one of {', '.join(VARIANT_NAMES)}")
    for key, allowed in (("BLOCK_M", BLOCK_M_VALUES), ("num_warps", NUM_WARPS_VALUES)):
        v = out[key]
        if isinstance(v, bool) or not isinstance(v, int) or v not in allowed:
            raise UserError(f"rope config {key}={v!r} is invalid; choose one of {allowed}")
    return out


@functools.lru_cache(maxsize=1)
def local_target() -> str | None:
    """Target name of the local GPU: "sm_90" from a CUDA capability, "gfx942" from ROCm's
    gcnArchName; None without a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None
        if getattr(torch.version, "hip", None):
            arch = getattr(torch.cuda.get_device_properties(0), "gcnArchName", "") or ""
            return arch.split(":")[0] or None
        major, minor = torch.cuda.get_device_capability(0)
        return f"sm_{major}{minor}"
    except Exception:
        return None


def results_dir() -> Path:
    env = os.environ.get(RESULTS_ENV)
    return Path(env) if env else Path(__file__).resolve().parents[2] / "results"


@functools.lru_cache(maxsize=16)
def _tuned_config_from(path: str) -> dict | None:
    """The ``winner: config:`` of a results YAML, validated; None on anything missing or bad."""
    try:
        import yaml

        with open(path, encoding="utf-8") as f:
            data = yaml.safe_load(f)
        return validate_config(dict(data["winner"]["config"]))
    except Exception:
        return None


def tuned_config(target: str | None = None) -> dict:
    """The tuned config for ``target`` (default: the local device) if one is recorded, else the
    default. Never raises: a missing, unreadable or malformed results file means the default."""
    target = target if target is not None else local_target()
    if target:
        found = _tuned_config_from(str(results_dir() / target / "rope.yaml"))
        if found is not None:
            return dict(found)
    return default_config()
