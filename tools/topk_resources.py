#!/usr/bin/env python3
"""Record the radix top-k kernel's resource usage per LDS budget for one AMD target.

    python3 tools/topk_resources.py [--arch gfx942] [--out kernels/topk/resources_gfx942.yaml]

Compiles kernels/topk/topk.cuh device-only with the newest clang that knows the target
(occtune.build.compiled: the ziglang wheel's clang 22 for gfx942/gfx950/gfx1250, else clang-19 for
gfx942) for every budget x coarse-key width, and writes the main kernel's remarks to a YAML with
provenance (compiler, date, command). No GPU needed. ``tune topk``/``tune analyze`` compile the same
way on demand (cached): this file is a record, not an input.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

from occtune.build import compiled  # noqa: E402
from occtune.errors import UserError  # noqa: E402
from occtune.fsutil import atomic_write_yaml  # noqa: E402
from occtune.kernels import topk as tk  # noqa: E402
from occtune.outputs.provenance import git_revision  # noqa: E402
from occtune.model.targets import load_target  # noqa: E402
from occtune.units import parse_size_list  # noqa: E402

KEYS = ("sgprs", "vgprs", "agprs", "scratch", "occupancy", "sgpr_spill", "vgpr_spill", "lds")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--arch", default="gfx942")
    ap.add_argument("--budgets", default="32K,40K,48K,128K")
    ap.add_argument("--threads", type=int, default=512)
    ap.add_argument("--bits", default="8,12")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    try:
        target = load_target(a.arch)
        limit = target.max_lds_per_workgroup
        rows, comp = [], None
        for bits in [int(b) for b in a.bits.split(",")]:
            for budget in parse_size_list(a.budgets, "budgets"):
                macros = tk.defines(budget, a.threads, bits)
                comp, kernels = compiled.compile_hip(tk.read_source(), a.arch, macros, tk.SOURCE_PATH.name)
                k = kernels[tk.KERNEL_NAME]
                total = k.get("lds", 0) + budget
                rows.append({"lds_budget": budget, "threads": a.threads, "bits": bits, "capacity_entries": budget // 8,
                             **{key: k[key] for key in KEYS if key in k}, "dynamic_lds": budget,
                             "total_lds": total, "fits_workgroup_lds": total <= limit})
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(a.out or ROOT / "kernels" / "topk" / f"resources_{a.arch}.yaml")
    cmd = " ".join(Path(c).name if i == 0 else c for i, c in enumerate(compiled.hip_command(
        comp, a.arch, tk.SOURCE_PATH.name, "topk.s", tk.defines(parse_size_list(a.budgets)[0], a.threads,
                                                                  int(a.bits.split(",")[0])))))
    doc = {"kernel": tk.KERNEL_NAME, "source": "kernels/topk/topk.cuh", "arch": a.arch,
           "provenance": {"tool": comp.ident, "date": dt.date.today().isoformat(),
                          "git_revision": git_revision() or "unknown", "command_example": cmd,
                          "note": "the main kernel's kernel-resource-usage remarks (lds: static LDS; occupancy: "
                                  "LLVM's waves/SIMD, which does not see the dynamic LDS = the budget)",
                          "lds_per_workgroup": limit},
           "configs": rows}
    atomic_write_yaml(out, doc)
    for r in rows:
        print(f"bits={r['bits']:2d} budget={r['lds_budget']:6d}  VGPRs={r.get('vgprs')} SGPRs={r.get('sgprs')} "
              f"static LDS={r.get('lds')} total={r['total_lds']} fits={r['fits_workgroup_lds']} "
              f"LLVM occupancy={r.get('occupancy')}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
