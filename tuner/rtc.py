"""The one place that wraps runtime compilation of CUDA/HIP kernels (NVRTC or hiprtc via torch).

``compile_kernel(source, name, defines, device)`` builds one kernel with ``-DNAME=value``
options for the device's architecture through ``torch.cuda._compile_kernel`` (a private torch
API: present in torch >= 2.8; on ROCm builds torch routes it through hiprtc and
``hipModuleLaunchKernel``), raises the dynamic shared-memory limit when asked, and caches the
result in-process by (source hash, defines, arch). ``launch`` starts it on the current stream.
``kernel_attributes`` reads what the compiler allotted (registers, static shared memory).

torch's launcher passes Python ints as C ``int`` and tensors as pointers: a kernel built
through here takes only pointers and 32-bit ints (use a dummy tensor and a flag for "null").
"""

from __future__ import annotations

import ctypes
import hashlib
import time
from dataclasses import dataclass, field
from typing import Any

from occtune.errors import UserError

_CACHE: dict[tuple, "RtcKernel"] = {}

# CUfunction_attribute / hipFunction_attribute (same numbering in both APIs).
_ATTRS = {"max_threads_per_block": 0, "static_smem": 1, "const_bytes": 2, "local_bytes": 3,
          "num_regs": 4, "ptx_version": 5, "binary_version": 6}


@dataclass
class RtcKernel:
    kernel: Any                 # torch's _CudaKernel (callable)
    name: str
    arch: str
    defines: dict
    options: list[str]
    compile_s: float
    dynamic_smem: int = 0
    info: dict = field(default_factory=dict)


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def build_options(defines: dict | None, extra: list[str] | None = None) -> list[str]:
    """``{"A": 1, "B": None}`` -> ``["-DA=1", "-DB"]`` in sorted order (stable cache keys)."""
    opts = []
    for k in sorted(defines or {}):
        if not isinstance(k, str) or not k.isidentifier():
            raise UserError(f"compile define {k!r} is not a valid macro name; use letters, digits and _")
        v = defines[k]
        if isinstance(v, bool):
            v = int(v)
        if v is None:
            opts.append(f"-D{k}")
        else:
            text = str(v)
            if any(c.isspace() for c in text) or '"' in text:
                raise UserError(f"compile define {k}={text!r} contains spaces or quotes; pass a plain value")
            opts.append(f"-D{k}={text}")
    return opts + list(extra or [])


def _torch_api():
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        raise UserError("torch is not installed; install torch with CUDA or ROCm support") from None
    fn = getattr(torch.cuda, "_compile_kernel", None)
    if fn is None:
        raise UserError(
            f"torch {torch.__version__} has no torch.cuda._compile_kernel (runtime compilation); "
            "use torch >= 2.8 built with CUDA or ROCm")
    if not torch.cuda.is_available():
        raise UserError("no CUDA/ROCm GPU is visible to torch; run this on a machine with a GPU")
    return torch, fn


def device_arch(device: Any = None) -> str:
    """Architecture string as the runtime compiler wants it: '90' (sm_90) or 'gfx942:...'."""
    torch, _ = _torch_api()
    idx = torch.device(device).index if device is not None and torch.device(device).index is not None \
        else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(idx)
    if getattr(torch.version, "hip", None):
        return str(props.gcnArchName)
    return f"{props.major}{props.minor}"


def _device_index(torch, device: Any) -> int:
    if device is not None and torch.device(device).index is not None:
        return torch.device(device).index
    return torch.cuda.current_device()


def compile_kernel(source: str, name: str, defines: dict | None = None, device: Any = None,
                   dynamic_smem: int = 0, extra_options: list[str] | None = None) -> RtcKernel:
    """Compile ``name`` from ``source`` with ``-D`` defines for ``device`` (cached in-process)."""
    torch, fn = _torch_api()
    arch = device_arch(device)
    options = build_options(defines, extra_options)
    key = (source_hash(source), name, tuple(options), arch, int(dynamic_smem))
    hit = _CACHE.get(key)
    if hit is not None:
        return hit
    # Builds may run on the engine's build threads, where no CUDA context is current yet: the
    # module load then fails with "invalid device context". Make the device's primary context
    # current in this thread first (cudaSetDevice does that).
    torch.cuda.set_device(_device_index(torch, device))
    t0 = time.perf_counter()
    try:
        kern = fn(source, name, compute_capability=arch, nvcc_options=list(options))
    except RuntimeError as e:
        lines = [ln.strip() for ln in str(e).strip().splitlines() if ln.strip()]
        # the compiler's first "error" line says what is wrong; the first line only that it failed
        errs = [ln for ln in lines if "error" in ln.lower() and "compilation failed" not in ln.lower()]
        first = (errs or lines or [type(e).__name__])[0]
        raise UserError(f"runtime compilation of {name} failed ({first}); "
                        f"options {' '.join(options)}") from None
    if dynamic_smem:
        try:
            kern.set_shared_memory_config(int(dynamic_smem))
            _raise_dynamic_smem_limit(torch, kern, int(dynamic_smem))
        except RuntimeError as e:
            raise UserError(f"{name}: cannot grant {dynamic_smem} bytes of dynamic shared memory "
                            f"on this device ({e}); choose a smaller budget") from None
    handle = RtcKernel(kern, name, arch, dict(defines or {}), options,
                       time.perf_counter() - t0, int(dynamic_smem))
    handle.info = kernel_attributes(handle)
    _CACHE[key] = handle
    return handle


def _raise_dynamic_smem_limit(torch, kern, nbytes: int) -> None:
    """CUDA: set MAX_DYNAMIC_SHARED_SIZE_BYTES ourselves. torch skips it below 48 KB, but static +
    dynamic shared memory above 48 KB needs it too (else the launch fails: invalid argument)."""
    if getattr(torch.version, "hip", None):
        return
    from torch.cuda import _utils

    func = getattr(kern, "func", None)
    setter = getattr(_utils._get_gpu_runtime_library(), "cuFuncSetAttribute", None)
    if func is None or setter is None:
        return
    rc = setter(func, 8, ctypes.c_int(nbytes))   # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if rc != 0:
        raise RuntimeError(f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {nbytes}) returned {rc}")


def kernel_attributes(handle: RtcKernel) -> dict:
    """Registers, static shared memory etc. of a compiled kernel; {} where the driver won't say."""
    import torch
    from torch.cuda import _utils

    lib = _utils._get_gpu_runtime_library()
    getter = getattr(lib, "hipFuncGetAttribute" if getattr(torch.version, "hip", None)
                     else "cuFuncGetAttribute", None)
    func = getattr(handle.kernel, "func", None)
    if getter is None or func is None:
        return {}
    out = {}
    for label, code in _ATTRS.items():
        val = ctypes.c_int(0)
        try:
            rc = getter(ctypes.byref(val), code, func)
        except Exception:  # noqa: BLE001 - a missing symbol or ABI mismatch: report nothing
            return out
        if rc == 0:
            out[label] = int(val.value)
    return out


def occupancy_query(handle: RtcKernel, threads: int, dynamic_smem: int) -> int | None:
    """The driver's own answer: resident blocks per SM/CU of ``handle`` launched with ``threads``
    per block and ``dynamic_smem`` bytes (cuOccupancyMaxActiveBlocksPerMultiprocessor, or
    hipModuleOccupancyMaxActiveBlocksPerMultiprocessor on ROCm); None where it won't say."""
    import torch
    from torch.cuda import _utils

    lib = _utils._get_gpu_runtime_library()
    name = ("hipModuleOccupancyMaxActiveBlocksPerMultiprocessor" if getattr(torch.version, "hip", None)
            else "cuOccupancyMaxActiveBlocksPerMultiprocessor")
    fn = getattr(lib, name, None)
    func = getattr(handle.kernel, "func", None)
    if fn is None or func is None:
        return None
    blocks = ctypes.c_int(0)
    try:
        rc = fn(ctypes.byref(blocks), func, ctypes.c_int(int(threads)), ctypes.c_size_t(int(dynamic_smem)))
    except Exception:  # noqa: BLE001 - a missing symbol or ABI mismatch: no answer
        return None
    return int(blocks.value) if rc == 0 else None


class _CuLaunchConfig(ctypes.Structure):   # CUlaunchConfig (CUDA 12 driver API)
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.c_void_p), ("numAttrs", ctypes.c_uint)]


def max_active_clusters(handle: RtcKernel, grid: int, threads: int, dynamic_smem: int) -> int | None:
    """The driver's answer for a kernel with compile-time cluster dimensions: how many of its
    clusters can be resident at once (cuOccupancyMaxActiveClusters; clusters live in one GPC, so
    this can be less than blocks/SM x SMs / cluster size). None where the driver won't say."""
    import torch
    from torch.cuda import _utils

    if getattr(torch.version, "hip", None):
        return None
    fn = getattr(_utils._get_gpu_runtime_library(), "cuOccupancyMaxActiveClusters", None)
    func = getattr(handle.kernel, "func", None)
    if fn is None or func is None:
        return None
    cfg = _CuLaunchConfig(int(grid), 1, 1, int(threads), 1, 1, int(dynamic_smem), None, None, 0)
    n = ctypes.c_int(0)
    try:
        rc = fn(ctypes.byref(n), func, ctypes.byref(cfg))
    except Exception:  # noqa: BLE001 - a missing symbol or ABI mismatch: no answer
        return None
    return int(n.value) if rc == 0 else None


def launch(handle: RtcKernel, grid: tuple, block: tuple, args: list, shared_mem: int | None = None,
           stream: Any = None) -> None:
    """Launch asynchronously on ``stream`` (default: torch's current stream)."""
    smem = handle.dynamic_smem if shared_mem is None else int(shared_mem)
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    handle.kernel(grid=g, block=b, args=list(args), shared_mem=smem, stream=stream)


def clear_cache() -> None:
    _CACHE.clear()
