"""Rewrite results files in the current schema (occtune.results/2) without re-measuring.

    python tools/upgrade_results.py results/sm_90/topk.yaml results/sm_90/rope.yaml

Each file is read (an occtune.results/1 file is upgraded on load: winner.why -> explanation,
provenance.device_name -> device, excluded as a list of {config, reason}, floats rounded to what
was measured) and written back atomically by the one results writer. The numbers are the
measured ones; nothing is recomputed.
"""

from __future__ import annotations

import sys

from occtune.outputs.results import load_results, write_results


def main(paths: list[str]) -> None:
    for path in paths:
        write_results(path, load_results(path))
        print(f"upgraded {path}")


if __name__ == "__main__":
    main(sys.argv[1:])
