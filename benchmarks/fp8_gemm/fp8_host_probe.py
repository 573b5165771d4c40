#!/usr/bin/env python3
"""Host cost of one FP8 GEMM call (GPU machine), per PIPE: microseconds of host time per call,
measured as the wall time of N back-to-back eager calls without synchronisation (issue 32), for
``fp8_gemm`` and ``fp8_gemm(out=)`` (through the ops where their C++ kernels are in use), the same
call's Python path (``_run``: the launch plan from Python), ``torch.ops.occtune.fp8_gemm`` and
``fp8_gemm_out`` (their kernels C++ or Python, as printed), Triton's own
launcher (``kernel.launch``: what every call paid before the plans), the library as the sweep
calls it (torch scaled_mm, M padded inside the call as vLLM does) and a bare ``torch._scaled_mm``.
Every call's output is verified against the float64 reference before it is timed.

    python3 benchmarks/fp8_gemm/fp8_host_probe.py                                  # 7168,2048 at M 8 and 1024
    python3 benchmarks/fp8_gemm/fp8_host_probe.py --shapes 4096,7168,64 --calls 500

``host us/call`` is the host time; ``loop us/call`` the GPU time of the whole loop per call (the
larger of host and GPU time per call, L2 warm).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import gpu_missing, graph_of, refuse, serving_loop  # noqa: E402

# name -> config values (BLOCK_M BLOCK_N BLOCK_K GROUP_M num_warps num_stages PIPE): one per PIPE
CONFIGS = {"PIPE 0": (64, 128, 128, 32, 4, 2, 0), "PIPE 1": (64, 128, 128, 8, 4, 4, 1),
           "PIPE 2": (64, 128, 128, 8, 4, 4, 2), "PIPE 3": (64, 128, 128, 8, 4, 4, 3),
           "PIPE 4": (64, 128, 128, 8, 4, 3, 4), "PIPE 5": (64, 128, 128, 8, 4, 3, 5),
           "PIPE 6": (128, 128, 128, 8, 8, 4, 6), "PIPE 7": (128, 128, 128, 8, 8, 6, 7),
           "PIPE 8": (16, 128, 128, 1, 4, 3, 8), "PIPE 9": (16, 128, 128, 1, 4, 3, 9),
           "PIPE 10": (16, 64, 128, 1, 4, 4, 10)}


def parse_points(text: str) -> list:
    """``n,k,m;n,k,m`` as [(n, k, m), ...] (a UserError names a bad item)."""
    from occtune.errors import UserError

    out = []
    for item in text.split(";"):
        parts = item.split(",")
        if len(parts) != 3 or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise UserError(f"--shapes item {item!r} is not n,k,m (three positive integers)")
        out.append(tuple(int(p) for p in parts))
    return out


def rows_of(torch, inp, cfg: tuple):
    """(name, call) of every timed row of one config."""
    from occtune.kernels.fp8_gemm import _run, fp8_gemm
    from occtune.kernels.fp8_gemm.config import triton_row
    from occtune.kernels.fp8_gemm.kernel import launch

    a, a_s, b, b_s = inp.a, inp.a_s, inp.b, inp.b_s
    own = torch.empty_like(inp.out)
    as_dict = triton_row(cfg, "host probe")
    return [("fp8_gemm", lambda: fp8_gemm(a, a_s, b, b_s, cfg)),
            ("fp8_gemm out=", lambda: fp8_gemm(a, a_s, b, b_s, cfg, out=own)),
            ("fp8_gemm Python (_run)", lambda: _run(a, a_s, b, b_s, cfg)),
            ("torch.ops.occtune.fp8_gemm", lambda: torch.ops.occtune.fp8_gemm(a, a_s, b, b_s, list(cfg))),
            ("torch.ops.occtune.fp8_gemm_out", lambda: torch.ops.occtune.fp8_gemm_out(a, a_s, b, b_s, own, list(cfg))
             or own),
            ("Triton's launcher", lambda: launch(a, a_s, b, b_s, own, as_dict) or own)]


def probe_point(torch, n, k, m, calls, names):
    from occtune.kernels.fp8_gemm import fp8_gemm, op      # op registers torch.ops.occtune.fp8_gemm
    from occtune.kernels.fp8_gemm.config import library_config
    from occtune.kernels.fp8_gemm.family import Fp8GemmFamily, expected_rows, verify

    w = {"M": m, "N": n, "K": k}
    fam = Fp8GemmFamily([w], target="sm_90", backends=["triton", "torch_scaled_mm"])
    inp = fam.make_inputs(w, 0, "cuda")
    exp = expected_rows(inp)
    lib = fam.build(library_config("torch_scaled_mm", "sm_90"), "cuda").call
    sb = inp.prep["torch_scaled_mm"][: inp.a_s.shape[1]]
    print(f"\n(n, k) = ({n}, {k}), M = {m}: {calls} calls, no sync; the ops' kernels: "
          f"{'C++ (op_native.cpp)' if op.native_error() is None else f'Python ({op.native_error()})'}")
    print(f"  {'':40s} {'host us/call':>13s} {'loop us/call':>13s}")
    table = [("library (scaled_mm, M padded)", lambda: lib(inp)),
             ("torch._scaled_mm (bare)", lambda: torch._scaled_mm(inp.a, inp.b.t(), inp.a_s, sb,
                                                                  out_dtype=torch.bfloat16))]
    for name in names:
        cfg = CONFIGS[name]
        for label, call in rows_of(torch, inp, cfg):
            res = verify(call(), inp, exp)
            if not res.ok:
                raise RuntimeError(f"{name} {label}: wrong result ({res.reason}); not timed")
            table.append((f"{name} {label}", call))
        g = graph_of(torch, lambda cfg=cfg: fp8_gemm(inp.a, inp.a_s, inp.b, inp.b_s, cfg, out=inp.out))
        table.append((f"{name} CUDA graph replay", g.replay))
    for label, call in table:
        host, loop = serving_loop(torch, call, calls)
        print(f"  {label:40s} {host:13.1f} {loop:13.1f}", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="host cost per FP8 GEMM call")
    ap.add_argument("--shapes", default="7168,2048,8;7168,2048,1024", help="n,k,m;... (default: %(default)s)")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--pipes", default=",".join(str(p) for p in range(11)), help="PIPE values (default: all)")
    a = ap.parse_args(argv)
    from occtune.errors import UserError

    try:
        points = parse_points(a.shapes)
        names = [f"PIPE {int(p)}" for p in a.pipes.split(",")]
        if not all(nm in CONFIGS for nm in names):
            raise UserError(f"--pipes takes values 0-9, got {a.pipes!r}")
    except (UserError, ValueError) as e:
        return refuse(e)
    import torch

    if gpu_missing(torch):
        return 2
    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__}; host time of {a.calls} eager calls")
    for n, k, m in points:
        probe_point(torch, n, k, m, a.calls, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
