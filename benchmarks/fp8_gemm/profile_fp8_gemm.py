"""One launch each of torch's scaled_mm and of our FP8 GEMM configs on one problem, for Nsight Compute.

Only the launches inside cudaProfilerStart/Stop are profiled (each under an NVTX range with its
name), after three warm-up rounds, on the same inputs. Run on the GPU machine, e.g.:

    ncu --profile-from-start off --clock-control none --nvtx --section SpeedOfLight \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis --section Occupancy \
        --section LaunchStats python3 benchmarks/fp8_gemm/profile_fp8_gemm.py 4096 4096 7168

Configs: ``name=BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,num_warps,num_stages,PIPE`` after the shape
(default: the best PIPE 5, PIPE 5 at BLOCK_M 64, and the PIPE 1 kernel it replaced).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import gpu_missing, refuse  # noqa: E402

DEFAULT = ("wgmma128s4P=128,128,128,8,8,4,5", "wgmma64s3P=64,128,128,8,4,3,5", "tma64s4=64,128,128,8,4,4,1")


USAGE = "usage: profile_fp8_gemm.py M N K [name=BLOCK_M,BLOCK_N,BLOCK_K,GROUP_M,warps,stages[,PIPE] ...]"


def _fail(why: str):
    sys.exit(refuse(f"{why}; {USAGE}"))


def parse(argv):
    """((M, N, K), {name: config}); bad input is one line on stderr and exit 2, -h the usage."""
    from occtune.errors import UserError
    from occtune.kernels.fp8_gemm.config import config_problem, triton_row, validate_config

    if argv[:1] in (["-h"], ["--help"]):
        print(f"{USAGE}\n\n{__doc__.strip()}")
        sys.exit(0)
    if len(argv) < 3 or not all(x.isdigit() and int(x) > 0 for x in argv[:3]):
        _fail("give M N K as positive integers")
    cfgs = {}
    for spec in argv[3:] or DEFAULT:
        name, sep, values = spec.partition("=")
        try:
            if not (name and sep):
                raise ValueError(f"{spec!r} is not name=values")
            cfgs[name] = validate_config({"backend": "triton", **triton_row([int(v) for v in values.split(",")], spec)},
                                         "sm_90")
            why = config_problem(cfgs[name], "sm_90")
            if why:
                raise ValueError(f"{spec}: {why}")
        except (ValueError, UserError) as e:
            _fail(str(e))
    return tuple(int(x) for x in argv[:3]), cfgs


def main(argv=None) -> int:
    import torch

    from occtune.kernels.fp8_gemm.config import library_config, workload
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily

    (M, N, K), cfgs = parse(sys.argv[1:] if argv is None else argv)
    if gpu_missing(torch):
        return 2
    w = workload(M, N, K)
    fam = Fp8GemmFamily(workloads=[w], target="sm_90", backends=["triton", "torch_scaled_mm"])
    inp = fam.make_inputs(w, 0, "cuda")
    built = {"torch_scaled_mm": fam.build(library_config("torch_scaled_mm", "sm_90"), "cuda")}
    built.update({name: fam.build(c, "cuda") for name, c in cfgs.items()})
    for _ in range(3):
        for b in built.values():
            fam.run(b, inp)
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for name, b in built.items():
        torch.cuda.nvtx.range_push(name)
        fam.run(b, inp)
        torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    print(f"profiled {', '.join(built)} at M={M} N={N} K={K}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
