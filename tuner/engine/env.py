"""The environment fingerprint: what a measured point depends on besides its config and workload.

Device name and arch, driver and runtime versions, torch / triton / python versions, the timer
kind and the family's kernel source hash. Two runs share cached points only when every field is
equal; :func:`diff` names the fields that differ for the error message.
"""

from __future__ import annotations

import hashlib
import json
import platform
import re


def _torch_device_info(device) -> dict:
    import torch

    from occtune.model.targets import device_target

    info = {"torch": torch.__version__,
            "runtime": f"hip {torch.version.hip}" if getattr(torch.version, "hip", None)
            else f"cuda {torch.version.cuda}" if torch.version.cuda else "none"}
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type == "cuda" and torch.cuda.is_available():
        idx = dev.index if dev.index is not None else torch.cuda.current_device()
        props = torch.cuda.get_device_properties(idx)
        info["device_name"] = props.name
        info["arch"] = device_target(torch, idx)
        info["driver"] = driver_version()
    else:
        info["device_name"] = f"cpu ({platform.processor() or platform.machine()})"
        info["arch"] = platform.machine()
        info["driver"] = "none"
    return info


def driver_version() -> str:
    """The GPU driver's own version, asked of the driver: NVIDIA's kernel driver through NVML
    (e.g. "580.159.04"), else /proc/driver/nvidia/version; AMD's amdgpu module version from sysfs.
    "unknown" where none answers."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
        buf = ctypes.create_string_buffer(96)
        if nvml.nvmlInit_v2() == 0 and nvml.nvmlSystemGetDriverVersion(buf, 96) == 0:
            return buf.value.decode()
    except OSError:
        pass
    try:
        m = re.search(r"Kernel Module\s+(\S+)", open("/proc/driver/nvidia/version", encoding="utf-8").read())
        if m:
            return m.group(1)
    except OSError:
        pass
    try:
        return "amdgpu " + open("/sys/module/amdgpu/version", encoding="utf-8").read().strip()
    except OSError:
        pass
    return "unknown"


def _triton_version() -> str:
    try:
        import triton

        return triton.__version__
    except Exception:
        return "none"


def fingerprint(device, family_name: str, source_hash: str, timer_kind: str) -> dict:
    """Everything a cached point is keyed on besides config and workload."""
    fp = _torch_device_info(device)
    fp.update({
        "triton": _triton_version(),
        "python": platform.python_version(),
        "family": family_name,
        "source_hash": source_hash,
        "timer": timer_kind,
    })
    return {k: (v if v is None or isinstance(v, (int, float)) else str(v)) for k, v in sorted(fp.items())}


def fp_hash(fp: dict) -> str:
    return hashlib.sha256(json.dumps(fp, sort_keys=True).encode()).hexdigest()[:16]


def diff(old: dict, new: dict) -> list[str]:
    """Human lines 'field: old -> new' for every field that differs."""
    keys = sorted(set(old) | set(new))
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys if old.get(k) != new.get(k)]
