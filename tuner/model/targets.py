"""GPU targets: one immutable record per target, loaded and validated from profiles/targets/*.yaml.

Every parameter is ``{value, source[, confidence]}``; ``confidence: unconfirmed`` marks a value no
primary source confirmed, and anything computed from it is reported as unconfirmed too.
"""

from __future__ import annotations

import difflib
import os
import sys
import unicodedata
from dataclasses import MISSING, dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from occtune.errors import UserError
from occtune.validate import NAME, NON_NEGATIVE, POSITIVE, TEXT, Rule, load, read_yaml, spec


# Every parameter, per vendor, and what its value may be. Unknown keys are rejected too. Counts
# and sizes are positive (a zero granularity or SIMD count would divide by zero); the L2 size and
# the HBM bandwidth may be 0, which marks them unknown.
_SGPR_WAVES = Rule(list, items=Rule(list, length=2, items=POSITIVE))
_UNKNOWN_OK = {"l2_bytes": NON_NEGATIVE, "peak_hbm_bytes_per_s": Rule(float, min=0)}
SCHEMA: dict[str, dict[str, Rule]] = {
    "amd": {**{k: POSITIVE for k in (
        "compute_units", "wave_size", "simds_per_cu", "max_waves_per_simd", "max_threads_per_cu",
        "max_threads_per_workgroup", "max_workgroups_per_cu", "lds_per_cu", "max_lds_per_workgroup",
        "lds_alloc_granularity", "vgprs_per_simd_lane", "vgpr_alloc_granule", "max_vgprs_per_wave",
        "max_sgprs", "sgpr_alloc_granule")}, "sgpr_waves": _SGPR_WAVES, **_UNKNOWN_OK},
    "nvidia": {**{k: POSITIVE for k in (
        "sms", "warp_size", "max_warps_per_sm", "max_threads_per_sm", "max_blocks_per_sm",
        "max_threads_per_block", "registers_per_sm", "registers_per_block", "max_regs_per_thread",
        "reg_alloc_unit", "sub_partitions", "shared_per_sm", "max_shared_per_block_optin",
        "max_shared_per_block", "shared_alloc_unit")}, "reserved_shared_per_block": NON_NEGATIVE,
        **_UNKNOWN_OK},
}
# Optional parameters of either vendor: dense (no sparsity) tensor-core peaks in FLOP/s, for "% of
# peak" columns; a target without them simply has no such column.
OPTIONAL: dict[str, Rule] = {"peak_bf16_dense_flops": Rule(float, min=0), "peak_fp8_dense_flops": Rule(float, min=0)}


@dataclass(frozen=True)
class Param:
    value: object = spec(Rule())                    # checked by the vendor's SCHEMA rule
    source: str = spec(TEXT)
    confidence: str = spec(Rule(str, choices=("confirmed", "unconfirmed")), default="confirmed")


@dataclass(frozen=True)
class Target:
    name: str = spec(NAME)
    vendor: str = spec(Rule(str, choices=tuple(SCHEMA)))     # "amd" | "nvidia"
    description: str = spec(Rule(str))
    params: dict = field(default=MISSING, hash=False, compare=False, metadata={"rule": Rule(dict)})
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


def parse_target(data, path: str) -> Target:
    """Validate one target document; any problem names the file and the key."""
    target = load(Target, data, path, path=path)
    rules = SCHEMA[target.vendor]
    for key in rules:
        if key not in target.params:
            raise UserError(f"{path}: missing key 'params.{key}'")
    params = {}
    for key, entry in target.params.items():
        where = f"{path}: key 'params.{key}'"
        rule = rules.get(key) or OPTIONAL.get(key)
        if rule is None:
            raise UserError(f"{path}: unknown key 'params.{key}' for a {target.vendor} target")
        param = load(Param, entry, where)
        params[key] = replace(param, value=rule.check(param.value, f"{path}: key 'params.{key}.value'"))
    return replace(target, params=params)


def load_target_file(path: str | Path) -> Target:
    path = Path(path)
    target = parse_target(read_yaml(path, "target profile"), str(path))
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
    close = closest_name(name, list(targets))
    hint = f"; did you mean {close}?" if close else ""
    raise UserError(f"unknown target {name!r}; known targets: {', '.join(sorted(targets))}{hint}")


def closest_name(name: str, known: list[str]) -> str | None:
    """The known name ``name`` was probably meant to be: the same text once folded as a keyboard
    or an input method may have changed it (full-width ``ＧＦＸ９５０``, ``GFX950``), else the
    closest spelling; None when nothing is close."""
    folded = unicodedata.normalize("NFKC", str(name)).casefold().strip()
    exact = [k for k in known if k.casefold() == folded]
    if exact:
        return exact[0]
    close = difflib.get_close_matches(folded, known, n=1, cutoff=0.4)
    return close[0] if close else None


def driver_present(vendor: str | None = None) -> bool:
    """Whether the GPU driver of ``vendor`` ("amd", "nvidia"; None: either) is loaded here.

    Read from the files the kernel drivers create (``/dev/kfd`` for ROCm, ``/dev/nvidia<N>`` or
    ``/proc/driver/nvidia/gpus/*`` for CUDA), so a machine without one needs no torch (1-2 s to
    import) to say it has no such GPU. Outside Linux: assume a driver may be there.
    """
    if not sys.platform.startswith("linux"):
        return True
    amd = Path("/dev/kfd").exists()
    nvidia = any(Path("/dev").glob("nvidia[0-9]*")) or any(Path("/proc/driver/nvidia/gpus").glob("*"))
    return {"amd": amd, "nvidia": nvidia}.get(vendor, amd or nvidia)


def device_target(torch, device=None) -> str:
    """The target name of a torch GPU device: ROCm's gcnArchName ("gfx942") on ROCm builds, "sm_90"
    from the compute capability on CUDA builds (whose gcnArchName holds the device's name)."""
    dev = torch.device(device) if device is not None else torch.device("cuda")
    props = torch.cuda.get_device_properties(dev.index if dev.index is not None else torch.cuda.current_device())
    if getattr(torch.version, "hip", None):
        return str(props.gcnArchName).split(":")[0]
    return f"sm_{props.major}{props.minor}"


def hopper_or_later(arch) -> bool:
    """True for NVIDIA architectures sm_90 and later ('90', 'sm_90', 'sm_90a', 'sm_100f', ...): what
    thread-block clusters and TMA descriptors need; False for gfx* and older NVIDIA."""
    a = str(arch or "").lower()
    digits = a[3:] if a.startswith("sm_") else a
    digits = digits.rstrip("af")                  # sm_90a, sm_100f
    return digits.isdigit() and int(digits) >= 90


def local_target() -> str | None:
    """The local GPU's target name (e.g. "sm_90"), or None without a GPU of a known target."""
    return detect()["target"]


def resolve_target(name: str | None, what: str = "the analytic sweep"):
    """(target, local): the named target, else this machine's GPU; ``local`` says whether it is
    the GPU here (so a run can be timed). No name and no GPU: a UserError naming ``what``."""
    local = local_target()
    if not (name or local):
        raise UserError(f"no GPU found here; pass --target (e.g. --target gfx950 or --target sm_90) for {what}")
    target = load_target(name or local)
    return target, target.name == local


def detect(vendor: str | None = None) -> dict:
    """The local device as {"target": name or None, "device": text}, without failing. With
    ``vendor``, only a device of that vendor is looked for (none at all without its driver)."""
    if not driver_present(vendor):
        return {"target": None, "device": "none" if vendor is None else f"none ({vendor})"}
    try:
        import torch
    except Exception:  # torch missing or broken: no device
        return {"target": None, "device": "none (torch not importable)"}
    try:
        if not torch.cuda.is_available():
            return {"target": None, "device": "none"}
        props = torch.cuda.get_device_properties(0)
        name = device_target(torch, 0)
        return {"target": name if name in all_targets() else None, "device": f"{props.name} ({name})"}
    except Exception as e:  # a broken driver must not crash `tune targets`
        return {"target": None, "device": f"none ({type(e).__name__}: {e})"}
