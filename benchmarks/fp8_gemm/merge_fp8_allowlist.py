#!/usr/bin/env python3
"""Merge two FP8 GEMM allow-list exports: the second one's points replace the first one's at the M
values it measured (bench_fp8_gemm.py --m 1,8,32,64 on top of a run over every M, say), and write
the merged allow-list JSON and use_triton predicate (allowlist.merge; the provenance names both).

    python3 benchmarks/fp8_gemm/merge_fp8_allowlist.py results/sm_90/fp8_gemm_allowlist_sm_90.json \\
        new/fp8_gemm_allowlist_sm_90.json --out-dir results/sm_90
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))      # benchmarks/: harness.py, read_probe.py
from harness import refuse  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="allow-list JSON (render_json) of the earlier run")
    ap.add_argument("new", help="allow-list JSON whose measured M values replace the base's")
    ap.add_argument("--out-dir", required=True)
    a = ap.parse_args(argv)
    import json

    from occtune.fsutil import atomic_write_text
    from occtune.kernels.fp8_gemm import allowlist

    docs = []
    for path in (a.base, a.new):
        try:
            docs.append(allowlist.load_json(Path(path).read_text(encoding="utf-8"), Path(path).name))
        except OSError as e:
            return refuse(f"cannot read {path}: {e.strerror or e}")
        except (json.JSONDecodeError, KeyError, ValueError, TypeError) as e:
            return refuse(f"{path} is not an fp8_gemm allow-list export ({type(e).__name__}: {e})")
    if docs[0]["target"] != docs[1]["target"]:
        return refuse(f"the two allow-lists are for {docs[0]['target']} and {docs[1]['target']}; merge one target's")
    doc = allowlist.merge(*docs)
    t = doc["target"]
    for name, text in ((f"fp8_gemm_allowlist_{t}.json", allowlist.render_json(doc)),
                       (f"fp8_gemm_use_triton_{t}.py", allowlist.render_predicate(doc))):
        print(f"wrote {atomic_write_text(Path(a.out_dir) / name, text)}")
    sm = doc["summary"]
    print(f"{sm['points']} points, Triton at {sm['triton_points']}; allow-list vs always-library "
          f"{sm['speedup_vs_always_library']}x, vs always-Triton {sm['speedup_vs_always_triton']}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
