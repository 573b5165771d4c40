"""RoPE launch configs: the default, validation, and the tuned config of the local device.

A config is a plain dict ``{"variant": str, "BLOCK_M": int, "num_warps": int}``.
"""

from __future__ import annotations

from occtune.outputs import tuned
from occtune.errors import UserError
from occtune.validate import POSITIVE, Rule
from occtune.outputs.tuned import local_target  # noqa: F401  (re-exported: the family and CLI use it)

VARIANT_NAMES = ("token", "batched", "tile", "flat", "heads")
BLOCK_M_VALUES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
NUM_WARPS_VALUES = (1, 2, 4, 8, 16)

DTYPES = ("bf16", "fp16", "fp32")
# The widest rope dim: a program keeps its rows' D columns (BLOCK_D, the next power of two) in
# registers. Cross-compiled for gfx950 (Triton 3.9, 4 warps): at D=4096 the flat kernel's 8-row
# tile takes 200 VGPRs and fits; at D=8192 it no longer fits a CU, and the 128-row tile spills
# 22 KB per lane; three configs took 239 s to compile. Real models' rope dims are 64-512.
MAX_ROPE_DIM = 4096
AXIS_RULES = {"variant": Rule(str, choices=VARIANT_NAMES), "BLOCK_M": Rule(int, choices=BLOCK_M_VALUES),
              "num_warps": Rule(int, choices=NUM_WARPS_VALUES)}
WORKLOAD_RULES = {"T": POSITIVE, "H": POSITIVE, "head_dim": POSITIVE, "dtype": Rule(str, choices=DTYPES),
                  "D": Rule(int, min=2, max=MAX_ROPE_DIM, multiple=2,
                            text=f"an even rope dim in 2..{MAX_ROPE_DIM} (rotations act on pairs; a program "
                                 f"holds its rows' D columns in registers)"),
                  "inverse": Rule(bool), "positions": Rule(bool)}

# sglang's untuned default (the batched kernel, 32 tokens per program, 4 warps).
BASELINE_CONFIG = {"variant": "batched", "BLOCK_M": 32, "num_warps": 4}

# Used when no tuned config exists. The flat kernel over token*heads rows, 16 rows and one warp
# per program, is the shape reported at 4.5-4.6 TB/s of a 5.37 TB/s copy on MI355X
# (shared/facts/kernels.md section 2); H200 measurements replace it through results/.
DEFAULT_CONFIG = {"variant": "flat", "BLOCK_M": 16, "num_warps": 1}


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


def tuned_config(target: str | None = None, workload: dict | None = None, device=None) -> dict:
    """The tuned config for ``workload`` (``{"T": tokens, "H": heads, "D": rope_dim}``; None: the
    overall winner) on ``target`` (default: the target of ``device``, else the current GPU), read
    from ``results/<target>/rope.yaml`` (``$OCCTUNE_RESULTS`` overrides the folder) by the nearest
    workload key (:mod:`occtune.outputs.tuned`); else (no such file) the default. A results file that is there
    but unusable is a UserError naming it."""
    found = tuned.tuned_config("rope", workload, target=target, device=device, validate=validate_config)
    return found if found is not None else default_config()
