"""GPU targets: one immutable record per target, loaded and validated from profiles/targets/*.yaml.

Every parameter is ``{value, source[, confidence]}``; ``confidence: unconfirmed`` marks a value no
primary source confirmed, and anything computed from it is reported as unconfirmed too.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import yaml

from occtune.errors import UserError


# Required parameters and their types, per vendor. Unknown keys are rejected too.
_NUM = (int, float)
SCHEMA: dict[str, dict[str, type | tuple]] = {
    "amd": {
        "compute_units": int, "wave_size": int, "simds_per_cu": int, "max_waves_per_simd": int,
        "max_threads_per_cu": int, "max_threads_per_workgroup": int, "max_workgroups_per_cu": int,
        "lds_per_cu": int, "max_lds_per_workgroup": int, "lds_alloc_granularity": int,
        "vgprs_per_simd_lane": int, "vgpr_alloc_granule": int, "max_vgprs_per_wave": int,
        "max_sgprs": int, "sgpr_alloc_granule": int, "sgpr_waves": list,
        "l2_bytes": int, "peak_hbm_bytes_per_s": _NUM,
    },
    "nvidia": {
        "sms": int, "warp_size": int, "max_warps_per_sm": int, "max_threads_per_sm": int,
        "max_blocks_per_sm": int, "max_threads_per_block": int, "registers_per_sm": int,
        "registers_per_block": int, "max_regs_per_thread": int, "reg_alloc_unit": int,
        "sub_partitions": int, "shared_per_sm": int, "max_shared_per_block_optin": int,
        "max_shared_per_block": int, "reserved_shared_per_block": int, "shared_alloc_unit": int,
        "l2_bytes": int, "peak_hbm_bytes_per_s": _NUM,
    },
}
# Optional parameters of either vendor: dense (no sparsity) tensor-core peaks in FLOP/s, for "% of
# peak" columns; a target without them simply has no such column.
OPTIONAL: dict[str, type | tuple] = {"peak_bf16_dense_flops": _NUM, "peak_fp8_dense_flops": _NUM}
_TOP_KEYS = {"name", "vendor", "description", "params"}
_PARAM_KEYS = {"value", "source", "confidence"}
_CONFIDENCE = {"confirmed", "unconfirmed"}


@dataclass(frozen=True)
class Param:
    value: object
    source: str
    confidence: str = "confirmed"


@dataclass(frozen=True)
class Target:
    name: str
    vendor: str            # "amd" | "nvidia"
    description: str
    params: dict = field(hash=False, compare=False)
    path: str = ""

    def __getattr__(self, key):
        # Parameters read as attributes: target.lds_per_cu. (Only called for missing attributes.)
        params = self.__dict__.get("params", {})
        if key in params:
            return params[key].value
        raise AttributeError(f"target {self.__dict__.get('name')!r} has no parameter {key!r}")

    @property
    def is_amd(self) -> bool:
        return self.vendor == "amd"

    def unconfirmed(self) -> list[str]:
        return [k for k, p in self.params.items() if p.confidence == "unconfirmed"]


def profiles_dir() -> Path:
    env = os.environ.get("OCCTUNE_PROFILES")
    if env:
        return Path(env)
    import occtune.profiles

    return Path(occtune.profiles.__file__).resolve().parent


def targets_dir() -> Path:
    return profiles_dir() / "targets"


def _type_ok(value, typ) -> bool:
    if isinstance(value, bool):
        return False
    if typ is int:
        return isinstance(value, int)
    return isinstance(value, typ)


def parse_target(data, path: str) -> Target:
    """Validate one target document; any problem names the file and the key."""
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping with keys name, vendor, description, params")
    for key in sorted(_TOP_KEYS - set(data)):
        raise UserError(f"{path}: missing key '{key}'")
    for key in sorted(set(data) - _TOP_KEYS):
        raise UserError(f"{path}: unknown key '{key}' (allowed: {', '.join(sorted(_TOP_KEYS))})")
    vendor = data["vendor"]
    if vendor not in SCHEMA:
        raise UserError(f"{path}: key 'vendor' must be one of {', '.join(SCHEMA)}, got {vendor!r}")
    if not isinstance(data["name"], str) or not data["name"]:
        raise UserError(f"{path}: key 'name' must be a non-empty string")
    raw = data["params"]
    if not isinstance(raw, dict):
        raise UserError(f"{path}: key 'params' must be a mapping of parameter -> {{value, source}}")
    schema = SCHEMA[vendor]
    for key in schema:
        if key not in raw:
            raise UserError(f"{path}: missing key 'params.{key}'")
    params = {}
    for key, entry in raw.items():
        where = f"params.{key}"
        typ = schema.get(key, OPTIONAL.get(key))
        if typ is None:
            raise UserError(f"{path}: unknown key '{where}' for a {vendor} target")
        if not isinstance(entry, dict) or "value" not in entry or "source" not in entry:
            raise UserError(f"{path}: key '{where}' must be a mapping with 'value' and 'source'")
        extra = set(entry) - _PARAM_KEYS
        if extra:
            raise UserError(f"{path}: key '{where}' has unknown field(s) {', '.join(sorted(extra))}")
        if not _type_ok(entry["value"], typ):
            want = getattr(typ, "__name__", "number")
            raise UserError(f"{path}: key '{where}.value' must be {want}, got {entry['value']!r}")
        if not isinstance(entry["source"], str) or not entry["source"].strip():
            raise UserError(f"{path}: key '{where}.source' must name where the value comes from")
        conf = entry.get("confidence", "confirmed")
        if conf not in _CONFIDENCE:
            raise UserError(f"{path}: key '{where}.confidence' must be confirmed or unconfirmed")
        params[key] = Param(entry["value"], entry["source"], conf)
    return Target(data["name"], vendor, str(data["description"]), params, path)


def load_target_file(path: str | Path) -> Target:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise UserError(f"cannot read target profile {path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({str(e).splitlines()[0]})") from None
    target = parse_target(data, str(path))
    if target.name != path.stem:
        raise UserError(f"{path}: key 'name' is {target.name!r} but the file is named {path.stem!r}")
    return target


@lru_cache(maxsize=None)
def _load_all(directory: str) -> dict[str, Target]:
    d = Path(directory)
    if not d.is_dir():
        raise UserError(f"no target profiles in {d}; set OCCTUNE_PROFILES to the project's profiles/")
    return {t.name: t for t in (load_target_file(p) for p in sorted(d.glob("*.yaml")))}


def all_targets() -> dict[str, Target]:
    return _load_all(str(targets_dir()))


def load_target(name: str) -> Target:
    targets = all_targets()
    if name in targets:
        return targets[name]
    known = ", ".join(sorted(targets))
    close = difflib.get_close_matches(name, list(targets), n=1, cutoff=0.4)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise UserError(f"unknown target {name!r}{hint} Known targets: {known}")


def detect() -> dict:
    """The local device as {"target": name or None, "device": text}, without failing."""
    try:
        import torch
    except Exception:  # torch missing or broken: no device
        return {"target": None, "device": "none (torch not importable)"}
    try:
        if not torch.cuda.is_available():
            return {"target": None, "device": "none"}
        props = torch.cuda.get_device_properties(0)
        arch = getattr(props, "gcnArchName", "") or ""
        if getattr(torch.version, "hip", None) and arch:
            name = arch.split(":")[0]
        else:
            name = f"sm_{props.major}{props.minor}"
        return {"target": name if name in all_targets() else None, "device": f"{props.name} ({name})"}
    except Exception as e:  # a broken driver must not crash `tune targets`
        return {"target": None, "device": f"none ({type(e).__name__}: {e})"}
