#!/usr/bin/env python3
"""Record the CUDA driver's occupancy answers for kernels with controlled resources (run on a GPU).

Compiles one CUDA file of small kernels with nvcc (-cubin, for the device's own sm_XY) at several
``-maxrregcount`` settings, loads each cubin with the driver API, reads ``NUM_REGS``,
``SHARED_SIZE_BYTES`` and ``MAX_THREADS_PER_BLOCK`` per kernel, raises
``MAX_DYNAMIC_SHARED_SIZE_BYTES`` to the opt-in maximum, and calls
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` over block sizes (32..1024, also 96, 160, 1000) and
dynamic shared sizes (0 .. 227 KB). Register pressure: N values loaded with volatile loads and
stored back in reverse order with volatile stores (all N live at once); ``__launch_bounds__`` caps.

Writes ``$OUT/occupancy_nvidia.yaml`` (or ``--out``) and prints a summary, including how many cases
agree with ``occtune.model.occupancy``. One failing case never stops the run. ``--dry-run``: compile only.
Usage: python tools/collect_nvidia_occupancy.py [--out PATH] [--device N] [--dry-run]
Needs: nvcc, and cuda-bindings (``cuda.bindings.driver`` or the older ``cuda.cuda``).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KB = 1024
LIVE = (4, 16, 40, 72, 120, 200)
STATIC_SMEM = (1024, 4000, 12288, 40960, 48000)
BLOCKS = (32, 64, 96, 128, 160, 192, 256, 320, 384, 512, 640, 768, 1000, 1024)
DYN_BLOCKS = (64, 128, 256, 512, 1000, 1024)
DYN_SIZES = (0, 1 * KB, 40 * KB, 48 * KB, 100 * KB, 160 * KB, 227 * KB)
MAXRREG = (None, 32, 64, 128)


# ----------------------------------------------------------------------------------- sources

def _live_body(n: int) -> list[str]:
    lines = [f"  float v{i} = in[t + {i * 4096}u];" for i in range(n)]
    lines += [f"  out[t + {i * 4096}u] = v{i};" for i in reversed(range(n))]
    return lines


def cuda_source() -> tuple[str, list[str]]:
    """All kernels in one file, and their names."""
    head = "(volatile float *out, volatile const float *in) {"
    tid = "  unsigned t = threadIdx.x + blockIdx.x * blockDim.x;"
    src, names = [], []

    def kernel(name, body, bounds=""):
        names.append(name)
        src.extend([f'extern "C" __global__ void {bounds}{name}{head}', tid, *body, "}", ""])

    for n in LIVE:
        kernel(f"live_{n}", _live_body(n))
    for s in STATIC_SMEM:
        m = s // 4
        kernel(f"smem_{s}", [f"  __shared__ float s[{m}];", f"  s[threadIdx.x % {m}u] = in[t];",
                             "  __syncthreads();", f"  out[t] = s[(threadIdx.x + 1u) % {m}u];",
                             *_live_body(8)])
    for n in (8, 64):
        kernel(f"dyn_{n}", ["  extern __shared__ float d[];", "  d[threadIdx.x] = in[t];",
                            "  __syncthreads();", "  out[t] = d[threadIdx.x ^ 1u];", *_live_body(n)])
    kernel("lb1024_96", _live_body(96), "__launch_bounds__(1024) ")
    kernel("lb256x4_96", _live_body(96), "__launch_bounds__(256, 4) ")
    kernel("lb128x8_dyn_40", ["  extern __shared__ float d[];", "  d[threadIdx.x] = in[t];",
                              "  __syncthreads();", "  out[t] = d[threadIdx.x ^ 1u];", *_live_body(40)],
           "__launch_bounds__(128, 8) ")
    return "\n".join(src) + "\n", names


def compile_cubins(arch: str, tmp: Path, log) -> list[tuple[str, Path]]:
    text, _ = cuda_source()
    cu = tmp / "occ_kernels.cu"
    cu.write_text(text)
    out = []
    for r in MAXRREG:
        flags = [f"-arch={arch}", "-O3"] + ([f"-maxrregcount={r}"] if r else [])
        cubin = tmp / f"occ_{r or 'default'}.cubin"
        cmd = ["nvcc", "-cubin", *flags, str(cu), "-o", str(cubin)]
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode != 0:
            log(f"  nvcc {' '.join(flags)} failed: {(p.stderr.strip().splitlines() or ['?'])[-1]}")
            continue
        out.append((" ".join(flags), cubin))
    return out


# ----------------------------------------------------------------------------------- driver

class Driver:
    """The few driver calls needed, through cuda-bindings (new or old module layout)."""

    def __init__(self, device: int):
        try:
            from cuda.bindings import driver as cu
        except ImportError:
            from cuda import cuda as cu  # cuda-python < 12.6
        self.cu = cu
        self.A = cu.CUfunction_attribute
        self.call(cu.cuInit, 0)
        self.dev = self.call(cu.cuDeviceGet, device)
        self.ctx = self.call(cu.cuDevicePrimaryCtxRetain, self.dev)
        self.call(cu.cuCtxSetCurrent, self.ctx)
        self.modules = []

    def call(self, fn, *args):
        res = fn(*args)
        err, rest = res[0], res[1:]
        if int(err) != 0:
            name = self.cu.cuGetErrorName(err)[1] if hasattr(self.cu, "cuGetErrorName") else err
            raise RuntimeError(f"{fn.__name__}: {name.decode() if isinstance(name, bytes) else name}")
        return rest[0] if len(rest) == 1 else rest

    def info(self) -> dict:
        cu, dev = self.cu, self.dev
        attr = cu.CUdevice_attribute
        name = self.call(cu.cuDeviceGetName, 256, dev)
        name = name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)
        major = self.call(cu.cuDeviceGetAttribute, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
        minor = self.call(cu.cuDeviceGetAttribute, attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)

        def get(a):
            try:
                return int(self.call(cu.cuDeviceGetAttribute, getattr(attr, a), dev))
            except Exception as e:  # noqa: BLE001 -- provenance only; never abort for it
                return f"unavailable: {e}"
        return {
            "name": name, "compute_capability": f"{major}.{minor}", "arch": f"sm_{major}{minor}",
            "driver_version": self.call(cu.cuDriverGetVersion),
            "sms": get("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
            "shared_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
            "shared_per_block_optin": get("CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
            "reserved_shared_per_block": get("CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK"),
            "registers_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
            "max_blocks_per_sm": get("CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
        }

    def load(self, cubin: Path):
        mod = self.call(self.cu.cuModuleLoadData, cubin.read_bytes())
        self.modules.append(mod)
        return mod

    def function(self, mod, name: str):
        return self.call(self.cu.cuModuleGetFunction, mod, name.encode())

    def attr(self, fn, name: str) -> int:
        return int(self.call(self.cu.cuFuncGetAttribute, getattr(self.A, name), fn))

    def set_max_dynamic(self, fn, value: int) -> None:
        self.call(self.cu.cuFuncSetAttribute, fn, self.A.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, value)

    def occupancy(self, fn, threads: int, dynamic: int) -> int:
        return int(self.call(self.cu.cuOccupancyMaxActiveBlocksPerMultiprocessor, fn, threads, dynamic))


def bindings_version() -> str:
    for mod in ("cuda.bindings", "cuda"):
        try:
            m = __import__(mod, fromlist=["__version__"])
            return f"{mod} {getattr(m, '__version__', '?')}"
        except ImportError:
            continue
    return "unavailable"


def nvcc_version() -> str:
    try:
        lines = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.splitlines()
        return next((ln.strip() for ln in lines if "release" in ln), "unknown")
    except OSError:
        return "unavailable"


# ----------------------------------------------------------------------------------- collect

def plan_for(kernel: str, max_threads: int) -> list[tuple[int, int]]:
    """(threads, dynamic shared bytes) pairs for one kernel."""
    pairs = [(b, 0) for b in BLOCKS if b <= max_threads]
    if "dyn" in kernel:
        pairs += [(b, d) for b in DYN_BLOCKS if b <= max_threads for d in DYN_SIZES if d]
    elif kernel.startswith("smem_"):
        pairs += [(b, d) for b in (128, 512) if b <= max_threads for d in (40 * KB, 100 * KB)]
    return pairs


def collect(drv: Driver, cubins, target: str, optin: int, log) -> tuple[list[dict], list[dict]]:
    _, names = cuda_source()
    cases, failures, seen = [], [], set()
    for flags, cubin in cubins:
        try:
            mod = drv.load(cubin)
        except Exception as e:  # noqa: BLE001
            failures.append({"id": f"load {flags}", "error": str(e)})
            continue
        for name in names:
            try:
                fn = drv.function(mod, name)
                regs = drv.attr(fn, "CU_FUNC_ATTRIBUTE_NUM_REGS")
                static = drv.attr(fn, "CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES")
                max_threads = drv.attr(fn, "CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK")
                drv.set_max_dynamic(fn, optin - static)
            except Exception as e:  # noqa: BLE001
                failures.append({"id": f"{name} [{flags}]", "error": str(e)})
                continue
            key = (name.split("_")[0], regs, static, max_threads)
            if key in seen:        # the same resources under another -maxrregcount: no new case
                continue
            seen.add(key)
            for threads, dyn in plan_for(name, max_threads):
                cid = f"{target}-{name}-r{regs}-t{threads}-d{dyn}"
                case = {"id": cid, "target": target, "kernel": name, "nvcc_flags": flags,
                        "threads": threads, "regs": regs, "static_smem": static, "dynamic_smem": dyn,
                        "max_threads_per_block": max_threads}
                if static + dyn > optin:
                    continue
                try:
                    case["driver_blocks_per_sm"] = drv.occupancy(fn, threads, dyn)
                except Exception as e:  # noqa: BLE001
                    case["error"] = str(e)
                    failures.append({"id": cid, "error": str(e)})
                cases.append(case)
        log(f"  {flags}: {len(cases)} cases so far")
    return cases, failures


def compare_with_model(cases: list[dict]) -> list[str]:
    try:
        from occtune.model.occupancy import Resources, occupancy
        from occtune.model.targets import load_target
    except Exception as e:  # noqa: BLE001
        return [f"model unavailable: {e}"]
    bad = []
    for c in cases:
        if "driver_blocks_per_sm" not in c:
            continue
        try:
            occ = occupancy(load_target(c["target"]), Resources(
                threads=c["threads"], static_lds=c["static_smem"], dynamic_lds=c["dynamic_smem"], regs=c["regs"]))
            if occ.blocks_per_cu != c["driver_blocks_per_sm"]:
                bad.append(f"{c['id']}: driver {c['driver_blocks_per_sm']}, model {occ.blocks_per_cu} ({occ.limiter})")
        except Exception as e:  # noqa: BLE001
            bad.append(f"{c['id']}: model raised {e}")
    return bad


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    out_dir = os.environ.get("OUT") or "."
    ap.add_argument("--out", default=str(Path(out_dir) / "occupancy_nvidia.yaml"))
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--arch", help="nvcc -arch for --dry-run (default: the device's)")
    ap.add_argument("--dry-run", action="store_true", help="compile the kernels only; no driver calls")
    args = ap.parse_args(argv)
    log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
    t0 = time.time()
    if shutil.which("nvcc") is None:
        log("error: nvcc not found on PATH")
        return 2

    with tempfile.TemporaryDirectory() as tmp:
        if args.dry_run:
            cubins = compile_cubins(args.arch or "sm_90", Path(tmp), log)
            _, names = cuda_source()
            log(f"dry run: {len(cubins)} cubins, {len(names)} kernels each, in {time.time() - t0:.1f} s")
            return 0 if cubins else 1
        drv = Driver(args.device)
        dev = drv.info()
        target = dev["arch"]
        log(f"device: {dev['name']} ({target}), driver {dev['driver_version']}")
        cubins = compile_cubins(args.arch or target, Path(tmp), log)
        optin = dev["shared_per_block_optin"]
        optin = optin if isinstance(optin, int) else 227 * KB
        cases, failures = collect(drv, cubins, target, optin, log)

    import yaml
    from occtune.fsutil import atomic_write_yaml
    doc = {
        "description": "cuOccupancyMaxActiveBlocksPerMultiprocessor for kernels of known resources; "
                       "regenerate with the command below on the GPU.",
        "provenance": {
            "generated": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": "python tools/collect_nvidia_occupancy.py",
            "device": dev, "nvcc": nvcc_version(), "bindings": bindings_version(),
            "python": sys.version.split()[0], "pyyaml": yaml.__version__,
            "failures": failures,
        },
        "cases": cases,
    }
    atomic_write_yaml(args.out, doc)
    bad = compare_with_model(cases)
    ok = sum("driver_blocks_per_sm" in c for c in cases)
    print(f"{ok} cases ({len(failures)} failures) from {dev['name']} written to {args.out} "
          f"in {time.time() - t0:.1f} s")
    print(f"model agrees on {ok - len(bad)}/{ok}")
    for line in bad[:40]:
        print("  DISAGREE", line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
