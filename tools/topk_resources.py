#!/usr/bin/env python3
"""Record the radix top-k kernel's resource usage per LDS budget for one AMD target.

    python3 tools/topk_resources.py [--arch gfx942] [--out kernels/topk/resources_gfx942.yaml]

Compiles kernels/topk/topk.cuh with clang HIP device-only for every budget x coarse-key width,
parses -Rpass-analysis=kernel-resource-usage, and writes a YAML with provenance (tool version,
date, command). No GPU needed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from occtune.kernels.topk import offline  # noqa: E402
from occtune.fsutil import atomic_write_yaml  # noqa: E402
from occtune.provenance import git_revision  # noqa: E402
from occtune.units import parse_size_list  # noqa: E402

LDS_PER_WORKGROUP = {"gfx90a": 65536, "gfx942": 65536, "gfx950": 163840}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--arch", default="gfx942")
    ap.add_argument("--budgets", default="32K,40K,48K,128K")
    ap.add_argument("--threads", type=int, default=512)
    ap.add_argument("--bits", default="8,12")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    clang = offline.find_clang()
    if clang is None:
        print("error: no clang found (need clang >= 17 with the AMDGPU target)", file=sys.stderr)
        return 2
    out = Path(a.out or ROOT / "kernels" / "topk" / f"resources_{a.arch}.yaml")
    limit = LDS_PER_WORKGROUP.get(a.arch.split(":")[0])
    rows = []
    for bits in [int(b) for b in a.bits.split(",")]:
        for budget in parse_size_list(a.budgets, "budgets"):
            r = offline.compile_hip(a.arch, budget, a.threads, bits, clang)
            total = r.get("static_lds", 0) + budget
            rows.append({"lds_budget": budget, "threads": a.threads, "bits": bits,
                         "capacity_entries": budget // 8, **{k: v for k, v in r.items() if k != "command"},
                         "dynamic_lds": budget, "total_lds": total,
                         "fits_workgroup_lds": None if limit is None else total <= limit})
            cmd = r["command"]
    rev = git_revision() or "unknown"   # "-dirty" when tracked files differ from that commit
    doc = {"kernel": "topk_transform_kernel", "source": "kernels/topk/topk.cuh", "arch": a.arch,
           "provenance": {"tool": offline.tool_version([clang, "--version"]),
                          "date": dt.date.today().isoformat(), "git_revision": rev,
                          "command_example": cmd,
                          "note": "static LDS and registers from the compiler's resource remarks; "
                                  "dynamic LDS is the budget (not known to the compiler)",
                          "lds_per_workgroup": limit},
           "configs": rows}
    atomic_write_yaml(out, doc)
    for r in rows:
        print(f"bits={r['bits']:2d} budget={r['lds_budget']:6d}  VGPRs={r.get('vgprs')} "
              f"SGPRs={r.get('sgprs')} static LDS={r.get('static_lds')} total={r['total_lds']} "
              f"fits={r['fits_workgroup_lds']} occupancy(regs)={r.get('occupancy_waves_per_simd')}")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
