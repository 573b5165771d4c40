"""The one place that wraps runtime compilation of CUDA/HIP kernels (NVRTC or hiprtc via torch).

``compile_kernel(source, name, defines, device)`` builds one kernel with ``-DNAME=value``
options for the device's architecture through ``torch.cuda._compile_kernel`` (a private torch
API: present in torch >= 2.8; on ROCm builds torch routes it through hiprtc and
``hipModuleLaunchKernel``), raises the dynamic shared-memory limit when asked, and caches the
result in-process by (source hash, defines, arch). The compiled binary is also kept on disk
(``$OCCTUNE_CACHE_DIR/rtc`` or ``~/.cache/occtune/rtc``, keyed by source, options, arch and the
torch/CUDA versions), so a later process only loads it: a cached rerun of a sweep compiles
nothing. ``launch`` starts it on the current stream. ``OCCTUNE_LOG_COMPILES=1`` prints one line per
kernel built or loaded (its macros, seconds, thread) on stderr.
``kernel_attributes`` reads what the compiler allotted (registers, static shared memory).

torch's launcher passes Python ints as C ``int`` and tensors as pointers: a kernel built
through here takes only pointers and 32-bit ints (use a dummy tensor and a flag for "null").

Serving-rate launches: torch's launcher builds a ctypes object per argument on every call (tens
of microseconds). ``ArgPack`` holds a kernel's arguments packed once (a slot per parameter and
the array of their addresses); ``launch_packed`` hands that array to the driver API directly,
with the function torch loaded (one compile, one module): through occtune's native launcher
(``occtune.build.native``: a small C module built once per machine that calls the driver's
``cuLaunchKernel`` / ``hipModuleLaunchKernel``), else cuda-python's ``cuLaunchKernel``
(``cuda.bindings.driver``) on CUDA or hip-python's ``hipModuleLaunchKernel`` on ROCm. Without
any of them it falls back to torch's launcher; ``RtcKernel.launcher`` says which.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import sys
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from occtune.errors import UserError

_CACHE: dict[tuple, "RtcKernel"] = {}
_LOCKS: dict[tuple, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()

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
    launcher: str = "torch"     # who launches it: "native", "cuda-python", "hip-python" or "torch" (fallback)
    fn: Any = None              # the function as the launcher's API wants it (None: torch's)


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
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(key, threading.Lock())
    with lock:                  # build threads asking for the same kernel: one compiles, the rest wait
        hit = _CACHE.get(key)
        if hit is None:
            hit = _CACHE[key] = _compile(torch, fn, source, name, defines, device, arch, options, dynamic_smem)
    return hit


def _compile(torch, fn, source, name, defines, device, arch, options, dynamic_smem) -> RtcKernel:
    """One kernel compiled (or its binary loaded from disk) and set up: see :func:`compile_kernel`."""
    # Builds may run on the engine's build threads, where no CUDA context is current yet: the
    # module load then fails with "invalid device context". Make the device's primary context
    # current in this thread first (cudaSetDevice does that).
    torch.cuda.set_device(_device_index(torch, device))
    t0 = time.perf_counter()
    try:
        kern = _compile_or_load(torch, fn, source, name, arch, list(options))
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
    log_compile(f"rtc: {name} {' '.join(o for o in options if o.startswith('-D'))} {handle.compile_s:.2f} s "
                f"(thread {threading.current_thread().name})")
    handle.info = kernel_attributes(handle)
    handle.launcher, handle.fn = driver_function(kern)
    return handle


def log_compile(what: str) -> None:
    """``OCCTUNE_LOG_COMPILES=1``: one line on stderr, stamped, of where a sweep's compile time goes."""
    if os.environ.get("OCCTUNE_LOG_COMPILES"):
        print(f"{what} (pid {os.getpid()}, t={time.time():.2f})", file=sys.stderr, flush=True)


def _binary_dir():
    from occtune.fsutil import cache_dir

    return cache_dir() / "rtc"


def _compile_or_load(torch, fn, source: str, name: str, arch: str, options: list[str]):
    """torch's ``_compile_kernel`` in its two steps (NVRTC/hiprtc, then module load), with the
    binary kept on disk between them; torch's one call where its private steps are missing."""
    from torch.cuda import _utils

    compile_, load = getattr(_utils, "_nvrtc_compile", None), getattr(_utils, "_cuda_load_module", None)
    if compile_ is None or load is None:
        return fn(source, name, compute_capability=arch, nvcc_options=options)
    key = hashlib.sha256(json.dumps([source_hash(source), name, options, arch, str(torch.__version__),
                                     str(torch.version.cuda), str(getattr(torch.version, "hip", None))]).encode()
                         ).hexdigest()[:32]
    path = _binary_dir() / f"{key}.bin"
    binary = mangled = None
    try:
        meta = json.loads(path.with_suffix(".json").read_text())
        binary, mangled = path.read_bytes(), meta["name"]
    except (OSError, ValueError, KeyError):
        pass
    if binary is None:
        binary, mangled = compile_(source, name, arch, None, options)
        _store(path, binary, mangled)
    try:
        mod = load(binary, [mangled])
    except RuntimeError:
        path.unlink(missing_ok=True)      # a damaged file: compile afresh once
        binary, mangled = compile_(source, name, arch, None, options)
        _store(path, binary, mangled)
        mod = load(binary, [mangled])
    return mod[mangled] if isinstance(mod, dict) else getattr(mod, mangled)


def _store(path, binary: bytes, mangled: str) -> None:
    """Write the binary and its kernel name atomically; a read-only cache folder is no error."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        for p, data in ((path, binary), (path.with_suffix(".json"), json.dumps({"name": mangled}).encode())):
            tmp = p.with_name(f"{p.name}.{os.getpid()}.tmp")
            tmp.write_bytes(data)
            os.replace(tmp, p)
    except OSError:
        pass


def _raise_dynamic_smem_limit(torch, kern, nbytes: int) -> None:
    """CUDA: set MAX_DYNAMIC_SHARED_SIZE_BYTES ourselves. torch skips it below 48 KB, but static +
    dynamic shared memory above 48 KB needs it too (else the launch fails: invalid argument)."""
    if getattr(torch.version, "hip", None):
        return
    rc = _func_set_attribute(kern, 8, nbytes)    # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    if rc not in (None, 0):
        raise RuntimeError(f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES, {nbytes}) returned {rc}")


def _func_set_attribute(kern, attribute: int, value: int) -> int | None:
    """CUDA: cuFuncSetAttribute(torch's loaded function of ``kern``, attribute, value) through the
    library torch loaded: its result code, or None where there is no function or no setter."""
    from torch.cuda import _utils

    func = getattr(kern, "func", None)
    setter = getattr(_utils._get_gpu_runtime_library(), "cuFuncSetAttribute", None)
    if func is None or setter is None:
        return None
    return setter(func, attribute, ctypes.c_int(int(value)))


def allow_nonportable_cluster(handle: RtcKernel) -> None:
    """CUDA: let ``handle``, whose compile-time cluster holds more than 8 blocks, launch and be
    asked about (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14 in cuda.h, set to 1;
    sm_90 and sm_100 allow up to 16 blocks). A UserError where the driver refuses."""
    import torch

    if getattr(torch.version, "hip", None):
        raise UserError(f"{handle.name}: thread-block clusters are CUDA only")
    rc = _func_set_attribute(handle.kernel, 14, 1)
    if rc != 0:
        raise UserError(f"{handle.name}: the driver does not allow clusters over 8 blocks here "
                        f"(cuFuncSetAttribute NON_PORTABLE_CLUSTER_SIZE_ALLOWED: {rc}); use 8 or fewer")


# What calling a driver function through ctypes raises when the library does not match what we
# pass (an ABI mismatch); anything else is a bug and is not caught.
_ABI_ERRORS = (ctypes.ArgumentError, OSError)


def _no_answer(function: str, e: Exception) -> None:
    """Say that a driver query could not be made (its answer is then None: 'won't say')."""
    import warnings

    warnings.warn(f"occtune: {function} could not be called ({type(e).__name__}: {e}); no answer from the driver",
                  RuntimeWarning, stacklevel=3)


def kernel_attributes(handle: RtcKernel) -> dict:
    """Registers, static shared memory etc. of a compiled kernel; {} where the driver won't say,
    and ``error`` where the query could not be made."""
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
        except _ABI_ERRORS as e:      # the driver library does not take these arguments
            out["error"] = f"{getattr(getter, '__name__', 'FuncGetAttribute')}: {type(e).__name__}: {e}"[:200]
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
    except _ABI_ERRORS as e:
        _no_answer(name, e)
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
    except _ABI_ERRORS as e:
        _no_answer("cuOccupancyMaxActiveClusters", e)
        return None
    return int(n.value) if rc == 0 else None


def launch(handle: RtcKernel, grid: tuple, block: tuple, args: list, shared_mem: int | None = None,
           stream: Any = None) -> None:
    """Launch asynchronously on ``stream`` (default: torch's current stream)."""
    smem = handle.dynamic_smem if shared_mem is None else int(shared_mem)
    g = tuple(grid) + (1,) * (3 - len(grid))
    b = tuple(block) + (1,) * (3 - len(block))
    handle.kernel(grid=g, block=b, args=list(args), shared_mem=smem, stream=stream)


# ---- launches with an argument array packed once (serving rates) -----------------------------

@dataclass(frozen=True)
class Ptr:
    """A pointer parameter in an ``ArgPack`` template: pointer number ``index`` of ``bind``."""

    index: int


_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


class ArgPack:
    """One kernel's parameters, packed once: ``template`` lists them in order, ``Ptr(i)`` for a
    pointer and an int for a 32-bit int. Ints are written at construction; ``bind(ptrs)``
    writes pointer ``ptrs[i]`` for every ``Ptr(i)``: all pointers sit in one array (a parameter
    ``Ptr(i)`` points at its element ``i``, shared by every ``Ptr(i)``), so a bind is one slice
    assignment. ``address`` is the ``void**`` array of the parameters that ``cuLaunchKernel`` /
    ``hipModuleLaunchKernel`` take (it stays valid, and the same, for the pack's lifetime)."""

    def __init__(self, template):
        self.template = list(template)
        self._n = 1 + max((t.index for t in self.template if isinstance(t, Ptr)), default=-1)
        self._ptrs = (ctypes.c_uint64 * max(1, self._n))()
        self._ints = []
        addrs = []
        for pos, t in enumerate(self.template):
            if isinstance(t, Ptr):
                addrs.append(ctypes.addressof(self._ptrs) + 8 * t.index)
                continue
            v = int(t)
            if not _INT32_MIN <= v <= _INT32_MAX:
                raise UserError(f"kernel argument {pos} = {v} does not fit a 32-bit int")
            self._ints.append(ctypes.c_int(v))
            addrs.append(ctypes.addressof(self._ints[-1]))
        self._array = (ctypes.c_void_p * max(1, len(addrs)))(*addrs)
        self.address = ctypes.addressof(self._array)

    def bind(self, ptrs) -> None:
        self._ptrs[:self._n] = ptrs[:self._n]

    def packed(self) -> list[int]:
        """What the parameters hold now (pointers and ints), in parameter order."""
        ints = iter(self._ints)
        return [int(self._ptrs[t.index]) if isinstance(t, Ptr) else int(next(ints).value) for t in self.template]

    def values(self, tensors) -> list:
        """The same arguments as torch's launcher takes them: ``tensors[i]`` for ``Ptr(i)``."""
        return [tensors[t.index] if isinstance(t, Ptr) else t for t in self.template]


@lru_cache(maxsize=1)
def _driver_api():
    """("native", occtune's native launcher, see ``occtune.build.native``) where it builds and the
    driver's launch function is found; else ("cuda-python", cuda.bindings.driver) on CUDA builds
    of torch, ("hip-python", hip.hip) on ROCm builds, where importable; None otherwise (torch's
    launcher is used)."""
    import torch

    hip_build = bool(getattr(torch.version, "hip", None))
    native = _native_launcher(hip_build)
    if native is not None:
        return "native", native
    if hip_build:
        try:
            from hip import hip
        except ImportError:
            return None
        return "hip-python", hip
    try:
        from cuda.bindings import driver
    except ImportError:
        try:
            from cuda import cuda as driver          # cuda-python before 12.6
        except ImportError:
            return None
    return "cuda-python", driver


@dataclass(frozen=True)
class NativeLauncher:
    """occtune's native launcher (``occtune.build.native``) and the driver launch function it calls."""

    launch_all: Any           # launch_all(function, launches, stream) -> None or (i, error code)
    function: int             # cuLaunchKernel / hipModuleLaunchKernel's address


def _native_launcher(hip_build: bool) -> NativeLauncher | None:
    """The native launcher with the driver's launch function (hipModuleLaunchKernel or
    cuLaunchKernel of the library torch loaded), or None where either is missing."""
    from occtune.build import native

    mod = native.module()
    fn = driver_launch_function(hip_build) if mod is not None else None
    return None if fn is None else NativeLauncher(mod.launch_all, fn)


def driver_launch_function(hip_build: bool) -> int | None:
    """The address of hipModuleLaunchKernel (ROCm) or cuLaunchKernel (CUDA) in the library torch
    loaded, or None where it is not found."""
    return driver_function_address("hipModuleLaunchKernel" if hip_build else "cuLaunchKernel")


def driver_function_address(name: str) -> int | None:
    """The address of driver function ``name`` in the library torch loaded (libcuda, or
    libamdhip64 on ROCm), or None where it is not found."""
    try:
        from torch.cuda import _utils

        fn = getattr(_utils._get_gpu_runtime_library(), name)
    except (AttributeError, OSError, RuntimeError):
        return None
    return int(ctypes.cast(fn, ctypes.c_void_p).value)


def native_launcher() -> NativeLauncher | None:
    """The native launcher where it is the driver API in use, else None."""
    api = _driver_api()
    return api[1] if api is not None and api[0] == "native" else None


def driver_function(kern) -> tuple[str, Any]:
    """(launcher, function) for a kernel that torch compiled and loaded: the launcher's own
    function object for torch's loaded function (one module, loaded once), or ("torch", None)."""
    addr = getattr(getattr(kern, "func", None), "value", None)
    api = _driver_api() if addr else None
    if api is None:
        return "torch", None
    name, mod = api
    try:
        if name == "native":
            return name, int(addr)
        if name == "cuda-python":
            return name, mod.CUfunction(addr)
        sym = getattr(mod, "ihipModuleSymbol_t", None)
        return name, (sym.fromObj(addr) if sym is not None else addr)
    except (TypeError, ValueError):       # a binding that will not wrap the handle: torch's launcher
        return "torch", None


_STREAMS: dict = {}      # raw stream handle -> the driver API's stream object (cuda-python)


def _cu_stream(driver, raw: int):
    s = _STREAMS.get(raw)
    if s is None:
        s = _STREAMS[raw] = driver.CUstream(raw)
    return s


class LaunchError(RuntimeError):
    """A driver-API launch failed; ``code`` is the CUresult / hipError_t number."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = int(code)


# No current context in this thread (CUDA_ERROR_INVALID_CONTEXT), or another device's context
# (CUDA_ERROR_INVALID_HANDLE): ``make_context_current`` and a second try can fix those.
CONTEXT_ERRORS = (201, 400)


def launch_packed(handle: RtcKernel, grid: int, block: int, smem: int, pack: ArgPack, stream: int,
                  tensors) -> None:
    """Launch ``handle`` on a 1-D grid with ``pack``'s arguments (bound already) on the raw
    stream ``stream``; torch's launcher (its current stream) gets ``pack.values(tensors)``."""
    if handle.launcher == "native":
        nat = _driver_api()[1]
        failed = nat.launch_all(nat.function, ((handle.fn, grid, block, smem, pack.address),), stream)
        if failed is not None:
            raise LaunchError(f"cuLaunchKernel/hipModuleLaunchKernel({handle.name}, grid {grid}, block {block}, "
                              f"{smem} B shared) failed: error {failed[1]}", failed[1])
    elif handle.launcher == "cuda-python":
        _, driver = _driver_api()
        err, = driver.cuLaunchKernel(handle.fn, grid, 1, 1, block, 1, 1, smem, _cu_stream(driver, stream),
                                     pack.address, 0)
        if err != driver.CUresult.CUDA_SUCCESS:
            raise LaunchError(f"cuLaunchKernel({handle.name}, grid {grid}, block {block}, {smem} B shared) "
                              f"failed: {err}", int(err))
    elif handle.launcher == "hip-python":
        _, hip = _driver_api()
        try:
            err, = hip.hipModuleLaunchKernel(handle.fn, grid, 1, 1, block, 1, 1, smem, stream, pack.address, None)
        except (TypeError, ValueError) as e:
            # hip-python refused an argument before launching (this path has not run on an AMD GPU
            # yet): this kernel goes back to torch's launcher, and says why
            handle.info["launcher_error"] = f"{type(e).__name__}: {e}"
            handle.launcher, handle.fn = "torch", None
            launch_packed(handle, grid, block, smem, pack, stream, tensors)
            return
        if err != hip.hipError_t.hipSuccess:
            raise LaunchError(f"hipModuleLaunchKernel({handle.name}) failed: {err}", int(err))
    else:
        handle.kernel(grid=(grid, 1, 1), block=(block, 1, 1), args=pack.values(tensors), shared_mem=smem,
                      stream=None)


def make_context_current(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current in this thread, for
    driver-API launches from a thread that has none yet (nothing for torch's launcher)."""
    api = _driver_api()
    if api is None or api[0] == "hip-python":
        return
    if api[0] == "native":
        _native_context_current(int(device_index))
        return
    driver = api[1]
    err, dev = driver.cuDeviceGet(int(device_index))
    if err == driver.CUresult.CUDA_SUCCESS:
        err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
    if err == driver.CUresult.CUDA_SUCCESS:
        err, = driver.cuCtxSetCurrent(ctx)
    if err != driver.CUresult.CUDA_SUCCESS:
        raise LaunchError(f"cannot make device {device_index}'s primary context current: {err}", int(err))


def _native_context_current(index: int) -> None:
    """make_context_current through the library torch loaded (ctypes: a rare path)."""
    import torch
    from torch.cuda import _utils

    lib = _utils._get_gpu_runtime_library()
    if getattr(torch.version, "hip", None):
        err = lib.hipSetDevice(ctypes.c_int(index))
    else:
        dev, ctx = ctypes.c_int(0), ctypes.c_void_p(0)
        err = lib.cuDeviceGet(ctypes.byref(dev), ctypes.c_int(index))
        err = err or lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        err = err or lib.cuCtxSetCurrent(ctx)
    if err:
        raise LaunchError(f"cannot make device {index}'s primary context current: error {err}", int(err))


def clear_cache() -> None:
    _CACHE.clear()
